"""What a person at the node's console runs besides the bootstrap: `status` (and its
`--wait`), `analyze`, `clean`. Reads the status file and the journal; `clean` alone
changes anything."""
