#!/usr/bin/env node
// @vercel/cosmosdb-server with keep-alive: its own CLI answers every request with
// "connection: close", so each request paid a new TLS connection (and the client's CA-store
// load, ~90 ms with OpenSSL 3.0). Cosmos DB keeps connections open, and so does this.
// Usage: node harness/emulators/cosmos-server.js PORT [HOST] [ADVERTISED_PORT]
"use strict";
const { createHttpsServer } = require("@vercel/cosmosdb-server");

const port = parseInt(process.argv[2] || "8081", 10);
const host = process.argv[3] || "127.0.0.1";
const advertisedPort = process.argv[4] ? parseInt(process.argv[4], 10) : undefined;
const server = createHttpsServer({ keepAlive: true });
const listeningAddress = server.address.bind(server);
if (advertisedPort) {
  // The account document (GET /) names the server's own port as the endpoint of its one
  // region, and the Cosmos SDKs send every later request there (endpoint discovery), so a
  // fault-injecting proxy in front of the server would only ever see that first request. The
  // library builds the account from server.address() in its "listening" handler, which runs
  // before the callback below: reporting ADVERTISED_PORT (the proxy's) there keeps the SDK
  // on the proxy.
  server.address = () => ({ ...listeningAddress(), port: advertisedPort });
}
server.listen(port, host, () => {
  console.log(`Ready to accept HTTPS connections at ${host}:${listeningAddress().port}`);
});
