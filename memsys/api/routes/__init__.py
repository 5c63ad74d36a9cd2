"""REST routes, one module per concept; each handler: validated input → service → output."""
