"""The local development host: stand-ins for the Azure services, for running and testing on one machine."""
