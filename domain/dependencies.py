"""The app's dependencies by the names outages, alerts, logs and the operator's tools give them."""

ORDERS_DB = "orders database"
STATE_STORE = "state store"
RECOVERY_INDEX = "recovery index"
COMPENSATION_LOG = "compensation log"
SERVICE_BUS = "Service Bus"
LEASE_STORE = "lease store"
