"""Leader election on an Azure blob lease (R10): the pattern's own suggestion for Supervisors.

Each holder proposes a lease ID derived from its name, so acquiring again renews its own lease
and nobody else's. Blob leases last 15-60 s (or forever); a dead leader's lease simply lapses.
"""

import uuid
from datetime import timedelta

from azure.core.exceptions import HttpResponseError, ResourceExistsError
from azure.storage.blob import BlobClient, BlobLeaseClient


class BlobLeaderLease:
    def __init__(self, blob: BlobClient, ttl: timedelta) -> None:
        seconds = int(ttl.total_seconds())
        if not 15 <= seconds <= 60:
            raise ValueError("blob leases last 15 to 60 seconds")
        self._blob = blob
        self._seconds = seconds

    def _lease(self, holder: str) -> BlobLeaseClient:
        return BlobLeaseClient(self._blob, lease_id=str(uuid.uuid5(uuid.NAMESPACE_URL, holder)))

    def acquire(self, holder: str) -> bool:
        try:
            self._blob.upload_blob(b"", overwrite=False)
        except ResourceExistsError:
            pass  # the lease blob is there already (or leased: then the upload is refused too)
        except HttpResponseError as error:
            if error.status_code != 412:
                raise
        try:
            self._lease(holder).acquire(lease_duration=self._seconds)
        except HttpResponseError as error:
            if error.status_code == 409:  # LeaseAlreadyPresent: another holder leads
                return False
            raise
        return True

    def release(self, holder: str) -> None:
        try:
            self._lease(holder).release()
        except HttpResponseError as error:
            if error.status_code not in (409, 412):  # not ours, or already gone
                raise
