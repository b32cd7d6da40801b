# hardening: bad input and fuzzing (owned by the hardening work)
