"""One call's checks and emission: parse-time rules, operand rules, the tile op, raw calls."""
