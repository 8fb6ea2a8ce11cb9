'use strict';
// BullMQ peer for the EchoMQ benchmark (bench/adapters/bullmq.py drives it).
// Copied into bench/node/ next to its node_modules and run from there.
//
//   node bench.js enqueue-one N          -> {"seconds": s}
//   node bench.js enqueue-bulk N BATCH   -> {"seconds": s}   (Queue.addBulk)
//   node bench.js prefill N              -> {"seconds": s}
//   node bench.js worker CONCURRENCY     runs until SIGTERM
//   node bench.js latency K              -> {"latencies_ms": [...]}, needs a worker running
//
// The worker's no-op processor does the harness bookkeeping shared by every
// peer (bench/tasks/probe.py): it writes "d" to the harness's FIFO (env
// BENCH_TALLY), the first task of the process "s<start s>\n" before it. The
// latency job RPUSHes ms from its enqueue call to processor start to bench:lat.
const fs = require('fs');
const { Queue, Worker } = require('bullmq');
const IORedis = require('ioredis');

const URL = process.env.BENCH_URL;
const QUEUE = 'bench';
const nowMs = () => performance.timeOrigin + performance.now();

function conn() {
  return new IORedis(URL, { maxRetriesPerRequest: null });
}

async function timed(fn) {
  const t = performance.now();
  await fn();
  return (performance.now() - t) / 1000;
}

async function main() {
  const [mode, a, b] = process.argv.slice(2);
  if (mode === 'worker') {
    const r = conn();
    let tally = null;
    const worker = new Worker(
      QUEUE,
      async (job) => {
        const t0 = nowMs() / 1000;
        if (job.name === 'lat') {
          await r.rpush('bench:lat', String(nowMs() - job.data.ts));
          return;
        }
        if (tally === null) {
          tally = fs.openSync(process.env.BENCH_TALLY, 'w');
          fs.writeSync(tally, `s${t0}\nd`);
        } else {
          fs.writeSync(tally, 'd');
        }
      },
      { connection: conn(), concurrency: Number(a || 1) },
    );
    worker.on('error', (e) => console.error('worker error', e));
    const stop = async () => {
      await worker.close();
      await r.quit();
      process.exit(0);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    return;
  }
  const queue = new Queue(QUEUE, { connection: conn() });
  await queue.waitUntilReady();
  let out;
  if (mode === 'enqueue-one') {
    const n = Number(a);
    out = {
      seconds: await timed(async () => {
        for (let i = 0; i < n; i++) await queue.add('noop', {});
      }),
    };
  } else if (mode === 'enqueue-bulk' || mode === 'prefill') {
    const n = Number(a);
    const batch = Number(b || 1000);
    out = {
      seconds: await timed(async () => {
        for (let done = 0; done < n; done += batch) {
          const m = Math.min(batch, n - done);
          const jobs = new Array(m);
          for (let i = 0; i < m; i++) jobs[i] = { name: 'noop', data: {} };
          await queue.addBulk(jobs);
        }
      }),
    };
  } else if (mode === 'latency') {
    const k = Number(a);
    const warmup = 3;
    const r = conn();
    const lat = [];
    for (let i = 0; i < warmup + k; i++) {
      if (i) await new Promise((res) => setTimeout(res, 50 + Math.random() * 100));
      await queue.add('lat', { ts: nowMs() });
      const got = await r.blpop('bench:lat', i === 0 ? 60 : 30);
      if (!got) throw new Error('latency job not picked up');
      if (i >= warmup) lat.push(Number(got[1]));
    }
    await r.quit();
    out = { latencies_ms: lat };
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
  await queue.close();
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
