"""The store on PostgreSQL (issue 18): schema, migrations, dialect, writer and reads."""
