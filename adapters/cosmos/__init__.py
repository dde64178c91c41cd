"""Azure Cosmos DB (NoSQL API): the state records and the recovery index, with the queries the
Supervisor and the starter run.
"""
