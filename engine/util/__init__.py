"""Small helpers every stage uses: where state lives (`paths`), asyncio helpers, table formatting."""
