"""What a report, an evidence cell and a check's own section are drawn with: Markdown tables and numbers
(`tables`), a run read once (`run_read`), an evidence cell (`cell`). Below the checks, so a check can say what
it measured in its own words (docs/architecture.md)."""
