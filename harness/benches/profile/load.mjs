// node load.mjs PORT N [PATH]: N requests GET PATH (default /api/items) over
// 8 keep-alive connections, each from the next of 50,000 addresses (as the
// workerd bench).
import http from "node:http";

const [port, n] = process.argv.slice(2, 4).map(Number);
const path = process.argv[4] ?? "/api/items";
const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
let next = 0;
let left = n;
let failed = 0;
const one = () =>
  new Promise((resolve) => {
    const i = next++ % 50000;
    const address = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
    const headers = { "CF-Connecting-IP": address };
    http
      .get({ host: "127.0.0.1", port, path, agent, headers }, (res) => {
        if (res.statusCode !== 200) failed++;
        res.resume();
        res.on("end", resolve);
      })
      .on("error", () => {
        failed++;
        resolve();
      });
  });
await Promise.all(Array.from({ length: 8 }, async () => { while (left-- > 0) await one(); }));
if (failed > 0) console.error(`${failed} requests failed or were not 200`);
process.exit(failed > 0 ? 1 : 0);
