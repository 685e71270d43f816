"""The DuckDB store: records spooled to disk (`files`), ingested under a lock (`ingest`, `lock`), the tables (`schema`)."""
