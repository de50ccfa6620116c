"""Alembic migrations: the only way kvplan's schema changes. Shipped inside the package."""
