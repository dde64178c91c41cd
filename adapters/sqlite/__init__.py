"""The embedded profile's stores in SQLite files: the state records, the recovery index, the
compensation log and the Supervisor's lease. Nothing to install; one machine only.
"""
