"""What the Durable functions agree on, below every layer that uses it: the names each one is
registered, called and started under (``names``) and the typed inputs and outputs of each activity
(``activities``). A leaf: it imports only ``domain``, so the orchestrators, the activities, the
services and ``function_app.py`` all import it and none of them imports upward.
"""
