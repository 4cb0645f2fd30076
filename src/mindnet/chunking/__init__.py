"""Chunking stage: token counts, sentence spans and the strategies that cut a note body into chunks."""
