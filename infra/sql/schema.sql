-- The orders database schema (E2) for SQL Server / Azure SQL: the tables and columns of
-- adapters/sql/orders.py SQLITE_SCHEMA, unchanged, made idempotent for T-SQL (which has no
-- CREATE TABLE IF NOT EXISTS). Run by infra/scripts/postprovision.sh against Azure SQL and by the
-- sql-init service of docker-compose.yml against the local SQL Server.
IF OBJECT_ID(N'dbo.Orders', N'U') IS NULL
CREATE TABLE Orders (
    OrderID     VARCHAR(64)  NOT NULL PRIMARY KEY,
    Customer    NVARCHAR(200) NOT NULL,
    TotalMinor  BIGINT       NOT NULL,
    StatusQueue VARCHAR(50)  NOT NULL,
    OrderHash   CHAR(64)     NOT NULL,
    Status      VARCHAR(32)  NOT NULL,
    StatusVersion INT        NOT NULL DEFAULT 0,
    CreatedAt   DATETIME2  NOT NULL,
    UpdatedAt   DATETIME2  NOT NULL
);
GO
-- A database provisioned before Orders.StatusVersion existed.
IF COL_LENGTH(N'dbo.Orders', N'StatusVersion') IS NULL
ALTER TABLE Orders ADD StatusVersion INT NOT NULL DEFAULT 0;
GO
IF OBJECT_ID(N'dbo.OrderLines', N'U') IS NULL
CREATE TABLE OrderLines (
    OrderID        VARCHAR(64) NOT NULL REFERENCES Orders (OrderID),
    LineNumber     INT         NOT NULL,
    Sku            VARCHAR(40) NOT NULL,
    Quantity       INT         NOT NULL,
    UnitPriceMinor BIGINT      NOT NULL,
    PRIMARY KEY (OrderID, LineNumber)
);
GO
