"""`crucible report`: which runs count (`query`), the statistics (`stats`), the report (`compute`), its formats (`render`)."""
