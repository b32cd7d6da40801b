# report stage (owned by the report work)
