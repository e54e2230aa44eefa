"""The fairness report's presenters (JSON, CSV; HTML and email join them) and the one format dispatch."""
