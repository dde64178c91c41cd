"""Azure Storage: the compensation log in Table Storage and the Supervisor's lease on a blob."""
