#!/usr/bin/env python3
"""tests/bench/flood.py: the unauthenticated clients an attacker can be, for
tests/bench/flood.sh. Every mode sends only to the address it is given (a
loopback port of a manager of ours), stops by itself after SECONDS, and
prints one line of figures:

  flood.py tokens HOST:PORT SECONDS CONC   HTTPS GET /metrics, a new random
                                           bearer token each, CONC at once
  flood.py pipeline HOST:PORT SECONDS [tls]
                                           GET /healthz back to back on one
                                           connection, never reading
  flood.py idle HOST:PORT N SECONDS        N keep-alive connections, each
                                           sending a request every 50 s
  flood.py probe HOST:PORT SECONDS IVL     a new connection every IVL s, GET
                                           /healthz: answer times (what a
                                           kubelet's probe sees)
"""
import asyncio
import logging
import os
import signal
import ssl
import sys
import time

# SIGINT or SIGTERM ends a mode early, as if its time were up: it still
# prints its figures.
END = [float("inf")]


def running(deadline):
    return time.monotonic() < min(deadline, END[0])


def stop_early(*_):
    END[0] = 0


def hostport(s):
    host, port = s.rsplit(":", 1)
    return host, int(port)


async def tokens(addr, seconds, conc):
    quiet_loop_errors()
    host, port = hostport(addr)
    ctx = insecure_tls()
    t0 = time.monotonic()
    deadline = t0 + seconds
    codes = {}

    async def one(k):
        # Many peers, not one: each client has a loopback source address of
        # its own (127.0.0.2 ...), as a flood from many hosts would.
        src = (f"127.0.0.{2 + k % 250}", 0) if host.startswith("127.") else None
        while running(deadline):
            try:
                r, w = await asyncio.wait_for(
                    asyncio.open_connection(host, port, ssl=ctx,
                                            local_addr=src), 5)
                tok = os.urandom(24).hex()
                w.write((f"GET /metrics HTTP/1.1\r\nHost: {host}\r\n"
                         f"Authorization: Bearer {tok}\r\n"
                         "Connection: close\r\n\r\n").encode())
                await w.drain()
                line = await asyncio.wait_for(r.readline(), 10)
                code = line.split(b" ")[1].decode() if line else "eof"
                w.close()
            except Exception as e:  # a refused or reset connection counts too
                code = type(e).__name__
            codes[code] = codes.get(code, 0) + 1

    await asyncio.gather(*(one(k) for k in range(conc)))
    total = sum(codes.values())
    print(f"tokens: {total} requests in {time.monotonic() - t0:.1f} s from "
          f"{min(conc, 250)} addresses; answers "
          + " ".join(f"{k}={v}" for k, v in sorted(codes.items())))


def insecure_tls():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def pipeline(addr, seconds, tls):
    quiet_loop_errors()
    host, port = hostport(addr)
    ctx = insecure_tls() if tls else None
    req = f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode() * 256
    t0 = time.monotonic()
    deadline = t0 + seconds
    sent = 0
    conns = 0
    while running(deadline):
        try:
            _, w = await asyncio.open_connection(host, port, ssl=ctx)
            conns += 1
            while running(deadline) and not w.is_closing():
                w.write(req)
                # The server may stop reading: then wait for room here
                # rather than pile up bytes in this process.
                while running(deadline):
                    try:
                        await asyncio.wait_for(w.drain(), 1)
                        sent += len(req)
                        break
                    except asyncio.TimeoutError:
                        continue
            w.close()
        except Exception:
            await asyncio.sleep(0.1)  # closed by the server: start again
    print(f"pipeline: {sent / 1e6:.1f} MB sent on {conns} connection(s) "
          f"in {time.monotonic() - t0:.1f} s, never reading")


async def idle(addr, n, seconds):
    quiet_loop_errors()
    host, port = hostport(addr)
    t0 = time.monotonic()
    deadline = t0 + seconds
    held = []
    for _ in range(n):
        try:
            held.append(await asyncio.wait_for(
                asyncio.open_connection(host, port), 2))
        except Exception:
            pass
    req = f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    opened = len(held)
    while running(deadline):
        for r, w in held:
            try:
                w.write(req)
                await w.drain()
            except Exception:
                pass
        for _ in range(500):  # 50 s, in steps that notice an early end
            if not running(deadline):
                break
            await asyncio.sleep(0.1)
    still = sum(1 for r, _ in held if not r.at_eof())
    print(f"idle: {opened} of {n} keep-alive connections opened, held "
          f"{time.monotonic() - t0:.1f} s; {still} still open at the end")


async def probe(addr, seconds, ivl):
    quiet_loop_errors()
    host, port = hostport(addr)
    deadline = time.monotonic() + seconds
    times, failed, why = [], 0, {}
    while running(deadline):
        t0 = time.monotonic()
        stage = "connect"
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection(host, port), 5)
            stage = "answer"
            w.write(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n"
                    "Connection: close\r\n\r\n".encode())
            await w.drain()
            line = await asyncio.wait_for(r.readline(), 5)
            w.close()
            if b" 200 " in line:
                times.append(time.monotonic() - t0)
            else:
                failed += 1
                k = f"{stage}:" + (line.split(b" ")[1].decode() if line else "eof")
                why[k] = why.get(k, 0) + 1
        except Exception as e:
            failed += 1
            k = f"{stage}:{type(e).__name__}"
            why[k] = why.get(k, 0) + 1
        await asyncio.sleep(max(0, ivl - (time.monotonic() - t0)))
    times.sort()
    worst = times[-1] if times else float("inf")
    p50 = times[len(times) // 2] if times else float("inf")
    print(f"probe: {len(times)} answered, {failed} failed; "
          f"median {p50 * 1000:.1f} ms, worst {worst * 1000:.1f} ms"
          + "".join(f"; {k} x{v}" for k, v in sorted(why.items())))
    # The figure flood.sh reads: the worst answer in ms, or -1 if any failed.
    print(f"probe-worst-ms {-1 if failed else round(worst * 1000, 1)}")


def quiet_loop_errors():
    # A connection the server closes under a client that writes is what
    # these floods expect: asyncio's warnings and late callbacks about it
    # would bury the figures.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: None)


def main(argv):
    signal.signal(signal.SIGINT, stop_early)
    signal.signal(signal.SIGTERM, stop_early)
    mode = argv[1] if len(argv) > 1 else ""
    if mode == "tokens" and len(argv) == 5:
        asyncio.run(tokens(argv[2], float(argv[3]), int(argv[4])))
    elif mode == "pipeline" and len(argv) in (4, 5):
        asyncio.run(pipeline(argv[2], float(argv[3]), argv[4:] == ["tls"]))
    elif mode == "idle" and len(argv) == 5:
        asyncio.run(idle(argv[2], int(argv[3]), float(argv[4])))
    elif mode == "probe" and len(argv) == 5:
        asyncio.run(probe(argv[2], float(argv[3]), float(argv[4])))
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
