# json_edit.sh — sourced by the shell tests that break a valid file to see
# it refused. The caller defines fail MESSAGE (exits non-zero).
#
# set_first FILE KEY VALUE OUT: FILE with the first "KEY": value set to
# VALUE (a JSON literal, copied as is), written to OUT. It fails the test
# if nothing changed, so a renamed key cannot turn a check into a no-op.
set_first() {
	awk -v key="\"$2\":" -v value="$3" '
		!done && (i = index($0, key)) {
			rest = substr($0, i + length(key))
			sub(/^[^,}]*/, "", rest)
			$0 = substr($0, 1, i - 1) key " " value rest
			done = 1
		}
		{ print }' "$1" >"$4"
	if cmp -s "$1" "$4"; then fail "set_first $2: $4 is unchanged"; fi
}
