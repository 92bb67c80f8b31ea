#!/usr/bin/env python3
"""Verify a recorded skiplock delivery with the Standard Webhooks reference library.

Usage: verify_webhook.py SECRET DELIVERY_JSON
DELIVERY_JSON holds {"headers": {...}, "body": "<the raw request body>"}. Exits 0 when the
signature verifies, 1 (with the library's reason) when it does not.
"""

import json
import sys

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def main() -> int:
    secret, path = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as f:
        delivery = json.load(f)
    try:
        payload = Webhook(secret).verify(delivery["body"], delivery["headers"])
    except WebhookVerificationError as e:
        print(f"verification failed: {e}")
        return 1
    print(f"verified: {len(payload['messages'])} messages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
