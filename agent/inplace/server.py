"""`machine-agent-update-extension`: the in-place update hooks served over HTTPS, for
Cluster API's Runtime SDK (register it with an ExtensionConfig: docs/in-place-updates.md).

Each call is answered from the request and, for UpdateMachine, two or three requests to
the management cluster: never a wait on the node (Cluster API calls again after
`retryAfterSeconds`), so every answer comes well within the handler's time-out."""

from __future__ import annotations

import argparse
import json
import logging
import ssl
import sys
import tempfile
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agent.inplace import decide, hooks, update
from agent.kube.client import Client

log = logging.getLogger(__name__)

MAX_BODY = 8 << 20
"""A hook request holds a few objects; anything larger is refused."""


def handlers(client: Client) -> dict[str, Callable[[hooks.Obj], hooks.Obj]]:
    """Path -> what answers it."""
    return {f"/{hooks.GROUP_VERSION}/discovery": lambda _: hooks.discovery(),
            hooks.path_of("CanUpdateMachineSet"): decide.can_update_machine_set,
            hooks.path_of("CanUpdateMachine"): decide.can_update_machine,
            hooks.path_of("UpdateMachine"): lambda r: update.update_machine(r, client)}


def make_server(address: str, port: int, cert: str, key: str,
                client: Client) -> ThreadingHTTPServer:
    routes = handlers(client)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s %s", self.address_string(), format % args)

        def do_POST(self) -> None:
            answer = routes.get(self.path.split("?")[0])
            if answer is None:
                self._send(404, {"message": f"no hook at {self.path[:200]}"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._send(413, {"message": f"request over {MAX_BODY} bytes"})
                return
            try:
                request = json.loads(self.rfile.read(length) or b"{}")
                if not isinstance(request, dict):
                    raise ValueError("not an object")
            except ValueError as err:
                self._send(400, {"message": f"not a hook request: {err}"})
                return
            try:
                response = answer(request)
            except Exception as err:  # a bug answers Failure, never a dropped connection
                log.exception("answering %s failed", self.path)
                response = hooks.failure(str(request.get("kind", "")).replace(
                    "Request", "Response"), f"the extension failed: {type(err).__name__}")
            hook = self.path.split("?")[0].split("/")[3]  # /GROUP/VERSION/HOOK[/HANDLER]
            log.info("%s: %s %s", hook, response.get("status"), response.get("message", ""))
            self._send(200, response)

        def _send(self, code: int, body: hooks.Obj) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    return server


def main(argv: list[str] | None = None) -> int:
    from agent.config.management import ManagementSpec
    from agent.errors import AgentError
    from agent.host import Host
    from agent.kube.kubeconfig import load_credentials

    parser = argparse.ArgumentParser(
        prog="machine-agent-update-extension",
        description="Serve Cluster API's in-place update hooks (Runtime SDK) for nodes run "
                    "by machine-agent: a KubeadmConfig's NTP servers, kubelet flags added "
                    "or changed and files with inline content, and a worker's newer "
                    "Kubernetes patch release, are made in place by the node's agent "
                    "(through the Machine's AgentConfig ConfigMap), everything else is "
                    "left to a rollout (docs/in-place-updates.md).",
        epilog="exit status:\n  0  stopped\n  2  the command line, the kubeconfig or the "
               "certificate is refused (the message says which)\n",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", required=True,
                        help="the management cluster (read Machines; get, create and patch "
                             "the Machines' AgentConfig ConfigMaps)")
    parser.add_argument("--cert", required=True, help="serving certificate (PEM)")
    parser.add_argument("--key", required=True, help="its private key (PEM)")
    parser.add_argument("--address", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=9443, help="port (default 9443)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    with tempfile.TemporaryDirectory(prefix="update-extension-") as scratch:
        try:
            creds = load_credentials(ManagementSpec(kubeconfig=args.kubeconfig), Host("/"),
                                     material=Host(scratch))
            server = make_server(args.address, args.port, args.cert, args.key,
                                 Client(creds))
        except (AgentError, OSError, ssl.SSLError) as err:
            print(f"machine-agent-update-extension: {err}", file=sys.stderr)
            return 2
        log.info("serving the in-place update hooks on https://%s:%d", args.address,
                 server.server_address[1])
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return 0


if __name__ == "__main__":  # the sandbox starts it with this interpreter, venv or not
    sys.exit(main())
