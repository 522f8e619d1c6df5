"""The local data plane: DoubleQueue, RAMStorage, StorageManager, BufferedLineExchanger, and the
task-wide speed limits every reader waits on (:mod:`wormhole.exchange.throttle`)."""

from wormhole.exchange.double_queue import DoubleQueue, Parcel, QueueClosed
from wormhole.exchange.exchanger import BufferedLineExchanger
from wormhole.exchange.storage import RAMStorage, StorageManager

__all__ = ["BufferedLineExchanger", "DoubleQueue", "Parcel", "QueueClosed", "RAMStorage", "StorageManager"]
