"""A whole 3D journey through idgate, from Python: the quickstart.

Creates a journey, runs a 3D liveness proof, submits an RG (front and
back), and watches the journey until its result, as an onboarding service
would. Along the way it shows the error model of docs/api.md:

- every error is a google.rpc.Status in the `grpc-status-details-bin`
  trailer; `ErrorInfo.reason` says what happened (here DOCUMENT_UNUSABLE,
  on a first photo with no document in it: the appkey stays usable, so the
  program sends the document again);
- a `RetryInfo` detail means a retry is safe after its delay; without one,
  the program does not retry. CreateJourney carries a `request_id`, so a
  retry never opens a second journey.

Run it against `cargo run --release -- serve` (the embedded sandbox):

    python3 -m venv .venv && .venv/bin/pip install -r requirements.txt
    .venv/bin/python journey.py

Environment: IDGATE_GATEWAY (host:port, default 127.0.0.1:50051);
IDGATE_TOKEN, a bearer token sent as `authorization: Bearer ...` (unset:
none, for a gateway that runs open); IDGATE_PROTO, the directory of the
idgate proto files (default: the repository's proto/).
"""

import importlib
import os
import struct
import sys
import tempfile
import time
import uuid
from pathlib import Path

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from grpc_tools import protoc

GATEWAY = os.environ.get("IDGATE_GATEWAY", "127.0.0.1:50051")
TOKEN = os.environ.get("IDGATE_TOKEN")
PROTO = Path(os.environ.get("IDGATE_PROTO", Path(__file__).resolve().parents[3] / "proto"))
# A deadline for each unary call, and for the whole watch.
CALL_TIMEOUT_S = 30
WATCH_TIMEOUT_S = 120
MAX_ATTEMPTS = 5

# The sandbox's test person whose registry check is positive (docs/sandbox.md).
PERSON = dict(
    cpf="521.100.001-39",
    name="Ana Positiva Souza",
    birth_date="1985-03-14",
    customer_reference="QUICKSTARTPY",
)

# An 8x8 grey JPEG after its start marker; the sandbox reads a document
# from an ASCII marker in a COM segment placed before it (docs/sandbox.md).
JPEG_BODY = bytes.fromhex(
    "ffdb004300" + "01" * 64 + "ffc0000b080008000801011100"
    + "ffc4001400010000000000000000000000000000" + "00"
    + "ffc4001410010000000000000000000000000000" + "00"
    + "ffda000801010000003f003fffd9"
)


def sandbox_jpeg(marker=None):
    """A tiny JPEG; with `marker`, one the sandbox reads as that document."""
    com = b""
    if marker:
        text = marker.encode() + b"\n"
        com = b"\xff\xfe" + struct.pack(">H", len(text) + 2) + text
    return b"\xff\xd8" + com + JPEG_BODY


def generated_modules(out):
    """Compiles proto/idgate/v1 with grpcio-tools into the directory `out`."""
    files = sorted(str(p.relative_to(PROTO)) for p in (PROTO / "idgate" / "v1").glob("*.proto"))
    well_known = str(Path(protoc.__file__).parent / "_proto")
    args = ["grpc_tools.protoc", f"-I{PROTO}", f"-I{well_known}",
            f"--python_out={out}", f"--grpc_python_out={out}", *files]
    if protoc.main(args) != 0:
        sys.exit(f"could not compile the proto files in {PROTO}")
    sys.path.insert(0, out)
    names = ["journey", "liveness", "document", "result"]
    pb = {n: importlib.import_module(f"idgate.v1.{n}_pb2") for n in names}
    grpc_pb = {n: importlib.import_module(f"idgate.v1.{n}_pb2_grpc") for n in names[:3]}
    return pb, grpc_pb


def metadata():
    return [("authorization", f"Bearer {TOKEN}")] if TOKEN else []


def details(err):
    """The ErrorInfo and RetryInfo of a failed call (None when absent)."""
    info = retry = None
    status = rpc_status.from_call(err)
    for any_ in status.details if status else []:
        if any_.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            any_.Unpack(info)
        elif any_.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            any_.Unpack(retry)
    return info, retry


def call(name, method, request):
    """`method(request)`, retried only when the error carries RetryInfo."""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            return method(request, timeout=CALL_TIMEOUT_S, metadata=metadata())
        except grpc.RpcError as err:
            info, retry = details(err)
            reason = info.reason if info else "no ErrorInfo"
            if retry is None or attempt == MAX_ATTEMPTS:
                raise
            delay = retry.retry_delay.ToTimedelta().total_seconds()
            print(f"    {name} failed with {err.code().name} / {reason}; "
                  f"RetryInfo says retry after {delay:g}s: retrying")
            time.sleep(delay)
    raise AssertionError("unreachable")


def main():
    with tempfile.TemporaryDirectory(prefix="idgate-python-client-") as out:
        return journey(*generated_modules(out))


def journey(pb, grpc_pb):
    v1j, v1l, v1d, v1r = pb["journey"], pb["liveness"], pb["document"], pb["result"]
    channel = grpc.insecure_channel(GATEWAY)
    journeys = grpc_pb["journey"].JourneyServiceStub(channel)
    liveness = grpc_pb["liveness"].LivenessServiceStub(channel)
    documents = grpc_pb["document"].DocumentServiceStub(channel)

    # 1. A journey; the request_id makes a retry safe (docs/guard.md).
    created = call("CreateJourney", journeys.CreateJourney,
                   v1j.CreateJourneyRequest(request_id=str(uuid.uuid4()), **PERSON))
    appkey = created.appkey
    print(f"[1] journey {created.journey_ref} created; appkey expires at "
          f"{created.expire_time.ToDatetime().isoformat()}Z")

    # 2. 3D liveness: a session for the front-end SDK, then its verification
    #    on the channel that issued it.
    session = call("StartSession3D", liveness.StartSession3D,
                   v1l.StartSession3DRequest(appkey=appkey, user_agent="idgate-quickstart-python/1"))
    verdict = call("VerifyLiveness3D", liveness.VerifyLiveness3D, v1l.VerifyLiveness3DRequest(
        appkey=appkey, session_token=session.session_token, channel=session.channel)).verdict
    print(f"[2] 3D liveness on channel {session.channel}: valid={verdict.valid} "
          f"code={v1r.LivenessCode.Name(verdict.code)}")

    # 3. The document. The first photo has no document in it: the gateway
    #    answers DOCUMENT_UNUSABLE and the appkey stays usable.
    photos = [[sandbox_jpeg()], [sandbox_jpeg("IDGATE-SANDBOX:rg-front"), sandbox_jpeg("IDGATE-SANDBOX:rg-back")]]
    for images in photos:
        request = v1d.SubmitDocumentImagesRequest(
            appkey=appkey, images=[v1d.DocumentImage(content=i) for i in images])
        try:
            submitted = call("SubmitDocumentImages", documents.SubmitDocumentImages, request)
            break
        except grpc.RpcError as err:
            info, _ = details(err)
            if info is None or info.reason != "DOCUMENT_UNUSABLE":
                raise
            print(f"[3] {err.code().name} / {info.reason}: no document in the photo; "
                  "taking the RG front and back again")
    else:
        sys.exit("the document was refused every time")
    print(f"[3] document accepted: code {submitted.document_code}")

    # 4. Watch the journey until its result (status changes, then the
    #    result on the last message).
    stream = journeys.WatchJourney(v1j.WatchJourneyRequest(journey_ref=created.journey_ref),
                                   timeout=WATCH_TIMEOUT_S, metadata=metadata())
    last = None
    for event in stream:
        print(f"[4] status {event.raw_status} ({v1r.JourneyStatus.Name(event.status)})")
        last = event
    if last is None or not last.HasField("result"):
        sys.exit("the watch ended without a result")
    result = last.result
    print(f"journey {created.journey_ref} finished: {result.raw_status}")
    return 0 if result.status == v1r.JOURNEY_STATUS_COMPLETE else 1


if __name__ == "__main__":
    sys.exit(main())
