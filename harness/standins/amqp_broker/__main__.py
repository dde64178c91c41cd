"""``python -m harness.standins.amqp_broker --config harness/emulators/servicebus-config/Config.json --port
0``

Prints one line, ``Ready amqp://<host>:<port>``, once it listens, then serves until SIGTERM or
SIGINT.
"""

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from harness.standins.amqp_broker.server import start_broker


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.standins.amqp_broker", description=__doc__)
    parser.add_argument("--config", type=Path, required=True, help="a Service Bus emulator Config.json")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5672, help="0 picks a free port")
    args = parser.parse_args(argv)
    try:
        broker = start_broker(args.config, host=args.host, port=args.port)
    except (ValueError, OSError) as error:
        print(f"cannot start the broker: {error}", file=sys.stderr)
        return 2
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"Ready {broker.url}", flush=True)
    stopping.wait()
    broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
