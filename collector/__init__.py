"""toolscore service: OTLP receiver, conversation assembly, pipeline, CLI."""
