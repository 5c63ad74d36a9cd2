"""THE rules: plain functions `(session, …) -> schema`. They flush, never commit."""
