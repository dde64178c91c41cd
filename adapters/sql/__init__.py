"""The orders database over pyodbc: Azure SQL / SQL Server, PostgreSQL or SQLite, one schema,
through an explicit connection pool.
"""
