package io.kvrouter.transport.nats;

import io.kvrouter.transport.json.RouterEventJson;
import io.kvrouter.transport.kvevents.StorageTier;
import io.kvrouter.transport.kvevents.TieredEvent;
import io.nats.client.Connection;
import io.nats.client.JetStreamApiException;
import io.nats.client.ObjectStore;
import io.nats.client.ObjectStoreManagement;
import io.nats.client.api.ObjectInfo;
import io.nats.client.api.ObjectMeta;
import io.nats.client.api.ObjectStoreConfiguration;
import io.nats.client.api.StorageType;
import io.nats.client.impl.Headers;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.NoSuchAlgorithmException;
import java.util.List;
import org.jspecify.annotations.Nullable;

/** The snapshots of one subject's replicas in a NATS object store bucket. */
final class Snapshots {
  /*
   * Implementation notes
   *
   * One object per replica: <subject>/<replicaId>. Its content is the index's dump on every tier
   * (TierEvents.dump) as one JSON array of router events (RouterEventJson), each event of a tier
   * beyond the device with Dynamo's storage_tier (an older snapshot has none: all device); its
   * headers say what it covers:
   *
   *   Kvrouter-Format           router-events-json-v1
   *   Kvrouter-Stream           the stream name
   *   Kvrouter-Stream-Created   the stream's creation time (an ISO instant)
   *   Kvrouter-Subject          the subject
   *   Kvrouter-Stream-Sequence  the last stream sequence whose event the dump includes
   *   Kvrouter-Events           the number of events
   *   Kvrouter-Tiers            only when the index had tiers: the tiers it had cumulative
   *                             indexes for, comma-separated (device,host_pinned,...); the
   *                             restore makes them before it applies the events
   *
   * The object store publishes an object's chunks first and its meta message (which carries the
   * headers) last, then purges the previous version's chunks: readers see either the old object
   * or the new one, and the client checks chunk count, size and SHA-256 digest on every get, so a
   * read that overlaps a replacement fails instead of returning a mix. Callers retry.
   *
   * "Latest" is the object with the highest sequence among those of this subject whose stream
   * name and creation time match the current stream: a stream deleted and created again restarts
   * its sequences at 1, and a snapshot of the old one must not be taken for a cover of the new
   * one. Objects are never deleted by kvrouter: a replica id that is not used again leaves its
   * object behind, harmless because it is older than the newest.
   *
   * Stateless apart from the handles; used by the caller's thread during start() and by the
   * replica's and the snapshot thread afterwards (jnats' ObjectStore is thread-safe).
   */

  static final String FORMAT = "router-events-json-v1";
  static final String H_FORMAT = "Kvrouter-Format";
  static final String H_STREAM = "Kvrouter-Stream";
  static final String H_CREATED = "Kvrouter-Stream-Created";
  static final String H_SUBJECT = "Kvrouter-Subject";
  static final String H_SEQUENCE = "Kvrouter-Stream-Sequence";
  static final String H_EVENTS = "Kvrouter-Events";
  static final String H_TIERS = "Kvrouter-Tiers";

  /** An object found in the bucket: its name and the sequence its headers say it covers. */
  record Candidate(String name, long sequence) {}

  /**
   * A snapshot read back: its events with their tiers, and the slowest tier the index had ({@link
   * StorageTier#DEVICE}: none beyond it).
   */
  record Loaded(
      String name, long sequence, List<TieredEvent> events, StorageTier slowest, long bytes) {}

  private final ObjectStore store;
  private final NatsEventStream stream;
  private final String streamCreated;

  Snapshots(ObjectStore store, NatsEventStream stream, String streamCreated) {
    this.store = store;
    this.stream = stream;
    this.streamCreated = streamCreated;
  }

  /** Opens the bucket, creating it (file storage, one replica) when it does not exist. */
  static ObjectStore openBucket(Connection nc, String bucket)
      throws IOException, JetStreamApiException {
    ObjectStoreManagement osm = nc.objectStoreManagement();
    try {
      osm.getStatus(bucket);
    } catch (JetStreamApiException e) {
      if (e.getApiErrorCode() != Subjects.STREAM_NOT_FOUND) throw e;
      try {
        osm.create(
            ObjectStoreConfiguration.builder(bucket)
                .description("kvrouter index snapshots")
                .storageType(StorageType.File)
                .build());
      } catch (JetStreamApiException raced) {
        osm.getStatus(bucket); // created by another replica meanwhile, else this throws
      }
    }
    return nc.objectStore(bucket);
  }

  String bucket() {
    return store.getBucketName();
  }

  String objectName(String replicaId) {
    return stream.subject() + "/" + replicaId;
  }

  /** The newest snapshot of this subject on the current stream, or null when there is none. */
  @Nullable Candidate latest() throws IOException, JetStreamApiException, InterruptedException {
    String prefix = stream.subject() + "/";
    Candidate best = null;
    for (ObjectInfo info : store.getList()) {
      if (info.isDeleted() || !info.getObjectName().startsWith(prefix)) continue;
      long seq = coveredSequence(info);
      if (seq >= 0 && (best == null || seq > best.sequence())) {
        best = new Candidate(info.getObjectName(), seq);
      }
    }
    return best;
  }

  /** The sequence of {@link #latest()}, 0 when there is no snapshot. */
  long latestSequence() throws IOException, JetStreamApiException, InterruptedException {
    Candidate c = latest();
    return c == null ? 0 : c.sequence();
  }

  /**
   * Reads the object {@code name} as it is now (which may be newer than when it was listed).
   *
   * @throws IllegalStateException when the object is gone, does not belong to the current stream,
   *     or its content does not match its meta (a read that overlapped a replacement)
   * @throws io.kvrouter.transport.json.EventDecodeException when its content is not a JSON array of
   *     router events
   */
  Loaded load(String name)
      throws IOException, JetStreamApiException, InterruptedException, NoSuchAlgorithmException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ObjectInfo info = store.get(name, out);
    long seq = coveredSequence(info);
    if (seq < 0) {
      throw new IllegalStateException(
          "object " + name + " is not a snapshot of stream " + stream.stream() + " as it is now");
    }
    byte[] bytes = out.toByteArray();
    return new Loaded(
        name,
        seq,
        RouterEventJson.readTieredEvents(bytes),
        slowestTier(name, info.getHeaders().getFirst(H_TIERS)),
        bytes.length);
  }

  /**
   * The slowest tier of a {@code Kvrouter-Tiers} header: DEVICE when absent.
   *
   * @throws IllegalStateException for a name that is not Dynamo's
   */
  static StorageTier slowestTier(String name, String header) {
    StorageTier slowest = StorageTier.DEVICE;
    if (header == null || header.isEmpty()) return slowest;
    for (String t : header.split(",", -1)) {
      StorageTier found = null;
      for (StorageTier c : StorageTier.values()) {
        if (RouterEventJson.storageTierName(c).equals(t)) found = c;
      }
      if (found == null) {
        throw new IllegalStateException(
            "snapshot " + name + ": header " + H_TIERS + " names an unknown tier '" + t + "'");
      }
      if (found.ordinal() > slowest.ordinal()) slowest = found;
    }
    return slowest;
  }

  /** Writes (replaces) this replica's snapshot of {@code dump}. */
  ObjectInfo write(String replicaId, long sequence, TierEvents.Dump dump)
      throws IOException, JetStreamApiException, NoSuchAlgorithmException {
    List<TieredEvent> events = dump.events();
    byte[] bytes = RouterEventJson.writeTieredEvents(events).getBytes(StandardCharsets.UTF_8);
    Headers h = new Headers();
    h.put(H_FORMAT, FORMAT);
    h.put(H_STREAM, stream.stream());
    h.put(H_CREATED, streamCreated);
    h.put(H_SUBJECT, stream.subject());
    h.put(H_SEQUENCE, Long.toString(sequence));
    h.put(H_EVENTS, Integer.toString(events.size()));
    if (dump.slowest() != StorageTier.DEVICE) {
      StringBuilder tiers = new StringBuilder();
      for (int t = 0; t <= dump.slowest().ordinal(); t++) {
        if (t > 0) tiers.append(',');
        tiers.append(RouterEventJson.storageTierName(StorageTier.values()[t]));
      }
      h.put(H_TIERS, tiers.toString());
    }
    ObjectMeta meta =
        ObjectMeta.builder(objectName(replicaId))
            .description("kvrouter index of " + stream.subject() + " through " + sequence)
            .headers(h)
            .build();
    return store.put(meta, new ByteArrayInputStream(bytes));
  }

  /** The sequence an object covers, or -1 when it is not a snapshot of the current stream. */
  private long coveredSequence(ObjectInfo info) {
    Headers h = info.getHeaders();
    if (h == null
        || !FORMAT.equals(h.getFirst(H_FORMAT))
        || !stream.stream().equals(h.getFirst(H_STREAM))
        || !streamCreated.equals(h.getFirst(H_CREATED))
        || !stream.subject().equals(h.getFirst(H_SUBJECT))) {
      return -1;
    }
    try {
      long seq = Long.parseLong(h.getFirst(H_SEQUENCE));
      return seq >= 0 ? seq : -1;
    } catch (NumberFormatException e) {
      return -1;
    }
  }
}
