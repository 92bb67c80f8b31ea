// Preloaded into each wrangler run (NODE_OPTIONS=--require): records every outgoing TCP connection
// and refuses any that is not to SKIPLOCK_NET_ALLOW (host:port), so a client that tries to reach the
// internet (an update check, telemetry, an API host other than the server under test) fails the
// flow instead of leaving this machine. The log (SKIPLOCK_NET_LOG) has one `host:port allowed|refused`
// line per attempt.
'use strict';

const fs = require('node:fs');
const net = require('node:net');

const allow = process.env.SKIPLOCK_NET_ALLOW;
const logFile = process.env.SKIPLOCK_NET_LOG;

if (allow && logFile) {
  const connect = net.Socket.prototype.connect;
  net.Socket.prototype.connect = function guardedConnect(...args) {
    const first = Array.isArray(args[0]) ? args[0][0] : args[0];
    let target;
    if (first && typeof first === 'object') {
      // An http(s) agent's options may carry `path: null` beside host and port: only a port-less
      // string path is a Unix socket.
      const unix = first.port === undefined && typeof first.path === 'string' && first.path !== '';
      target = unix ? `unix:${first.path}` : `${first.host ?? 'localhost'}:${first.port}`;
    } else if (typeof first === 'string' && Number.isNaN(Number(first))) {
      target = `unix:${first}`;
    } else {
      target = `${typeof args[1] === 'string' ? args[1] : 'localhost'}:${first}`;
    }
    const allowed = target === allow || target.startsWith('unix:');
    fs.appendFileSync(logFile, `${target} ${allowed ? 'allowed' : 'refused'}\n`);
    if (!allowed) {
      throw new Error(`net-guard: a connection to ${target} was refused; only ${allow} (the server under test) may be reached`);
    }
    return connect.apply(this, args);
  };
}
