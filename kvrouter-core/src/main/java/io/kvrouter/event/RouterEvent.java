package io.kvrouter.event;

import java.util.Objects;

/**
 * A cache event of one worker rank, with the publisher's event id (increasing per publisher;
 * transports use it to detect gaps).
 */
public record RouterEvent(Worker worker, long eventId, CacheEvent data) {
  public RouterEvent {
    Objects.requireNonNull(worker, "worker");
    Objects.requireNonNull(data, "data");
  }
}
