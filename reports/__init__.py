"""HTML pages, charts and exports (arrive with the report issue)."""
