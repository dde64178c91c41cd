-- The Function App's database user, from its user-assigned managed identity (Entra ID), with
-- only what adapters/sql/orders.py does: SELECT, INSERT and UPDATE on dbo (no DELETE, no DDL).
-- The agent gets no user: it never touches the orders database (agent_worker reads and writes
-- Service Bus and calls the remote service, nothing else).
--
-- sqlcmd variable: APP_IDENTITY_NAME = the managed identity's resource name (its display name in
-- Entra ID), output API_IDENTITY_NAME of main.bicep.
IF DATABASE_PRINCIPAL_ID(N'$(APP_IDENTITY_NAME)') IS NULL
    CREATE USER [$(APP_IDENTITY_NAME)] FROM EXTERNAL PROVIDER;
GO
GRANT SELECT, INSERT, UPDATE ON SCHEMA::dbo TO [$(APP_IDENTITY_NAME)];
GO
