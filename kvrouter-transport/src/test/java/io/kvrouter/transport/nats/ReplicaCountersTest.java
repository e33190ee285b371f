package io.kvrouter.transport.nats;

import io.kvrouter.transport.CounterSnapshotCheck;
import org.junit.jupiter.api.Test;

class ReplicaCountersTest {
  @Test
  void eachCounterReadsIntoTheNatsReplicaStatsComponentOfItsName() throws Exception {
    CounterSnapshotCheck.eachSlotReadsIntoItsComponent(
        ReplicaCounters.C.class, NatsReplicaStats.class, ReplicaCounters::snapshot);
  }
}
