"""The kit: what every slice uses and none owns.

Problems (`errors`), configuration (`settings`), request dependencies (`deps`), ETags and
cursors (`conditional`), the routes' shared headers and problem answers (`routes`), answer
formats (`formats`, `exposition`), keys and tokens (`security`), HTTP metrics (`metrics`), the
pure ASGI layers (`middleware`, `ratelimit`), the database's bounds (`db`), migrations
(`migrate`), the server (`server`, `deadlines`) and the offline docs (`docs`). The kit imports
no slice's use cases; ARCHITECTURE.md#layers draws it.
"""
