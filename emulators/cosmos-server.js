#!/usr/bin/env node
// @vercel/cosmosdb-server with keep-alive: its own CLI answers every request with
// "connection: close", so each request paid a new TLS connection (and the client's CA-store
// load, ~90 ms with OpenSSL 3.0). Cosmos DB keeps connections open, and so does this.
// Usage: node emulators/cosmos-server.js PORT [HOST]
"use strict";
const { createHttpsServer } = require("@vercel/cosmosdb-server");

const port = parseInt(process.argv[2] || "8081", 10);
const host = process.argv[3] || "127.0.0.1";
const server = createHttpsServer({ keepAlive: true }).listen(port, host, () => {
  const address = server.address();
  console.log(`Ready to accept HTTPS connections at ${host}:${address.port}`);
});
