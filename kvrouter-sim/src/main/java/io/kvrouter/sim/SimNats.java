package io.kvrouter.sim;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.index.KvIndex;
import io.kvrouter.transport.kvevents.StorageTier;
import io.kvrouter.transport.nats.NatsConnections;
import io.kvrouter.transport.nats.NatsEventPublisher;
import io.kvrouter.transport.nats.NatsEventStream;
import io.kvrouter.transport.nats.NatsReplica;
import io.nats.client.Connection;
import io.nats.client.JetStreamApiException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Consumer;

/**
 * {@code simulate --events nats://...}: the simulated engines publish their KV events to NATS
 * JetStream, and the router's index is a {@link NatsReplica} of that subject, so every event goes
 * engine → stream → index, and {@code kvrouter serve --events} replicas can follow the same subject
 * while the simulation runs.
 *
 * <pre>
 * Implementation notes
 *
 * One connection for the whole command. Each policy run gets a Feed on subject
 * kvrouter.events.simulate-<policy>.default (the subject kvrouter serve --events uses for model
 * simulate-<policy>, routing group default), replica id "simulate". The simulation runs in
 * simulated time on one thread: Feed.accept publishes one event synchronously, then waits until
 * the replica's thread applied it, so the index is exactly as fresh as with in-process delivery
 * and the results equal an in-process run's (at a few hundred microseconds per event: use it with
 * --requests). At attach, the replica loads what earlier runs left on the subject (snapshot and
 * stream); a Cleared is then published for every rank it holds and every rank of the new fleet,
 * so the index starts empty and followers see the same.
 * </pre>
 */
public final class SimNats implements AutoCloseable {
  private static final Duration WAIT = Duration.ofSeconds(60);

  private final String url;
  private final Connection nc;

  private SimNats(String url, Connection nc) {
    this.url = url;
    this.nc = nc;
  }

  /**
   * Connects to {@code url} ({@code nats://host:port}).
   *
   * @throws IllegalArgumentException when it is not a NATS URL
   * @throws IllegalStateException when no server answers
   */
  public static SimNats connect(String url) {
    return new SimNats(url, NatsConnections.connect("--events", url, "kvrouter-simulate"));
  }

  /** The subject of a policy run, as {@code kvrouter serve --events} names model {@code model}. */
  public static String model(Policy p) {
    return "simulate-" + p.cliName();
  }

  /** A run's event path: publish, then wait until the index applied it. */
  public static final class Feed implements Consumer<RouterEvent>, AutoCloseable {
    private final NatsEventStream stream;
    private final NatsReplica replica;
    private final NatsEventPublisher publisher;

    private Feed(NatsEventStream stream, NatsReplica replica, NatsEventPublisher publisher) {
      this.stream = stream;
      this.replica = replica;
      this.publisher = publisher;
    }

    @Override
    public void accept(RouterEvent e) {
      accept(StorageTier.DEVICE, e);
    }

    /**
     * Publishes an event about the copies on {@code tier} (with its {@code storage_tier}) and waits
     * until the index applied it: the replica puts it on that tier of a tiered index.
     */
    public void accept(StorageTier tier, RouterEvent e) {
      long seq;
      try {
        seq = publisher.publish(tier, e).getSeqno();
      } catch (IOException x) {
        throw new UncheckedIOException("NATS did not store an event on " + stream.subject(), x);
      } catch (JetStreamApiException x) {
        throw new IllegalStateException(
            "NATS refused an event on " + stream.subject() + ": " + x.getMessage(), x);
      }
      if (!replica.awaitApplied(seq, WAIT)) {
        throw new IllegalStateException(
            "the index did not apply stream sequence "
                + seq
                + " of "
                + stream.subject()
                + " within "
                + WAIT.toSeconds()
                + " s");
      }
    }

    public NatsEventStream stream() {
      return stream;
    }

    /** Stops the replica (the index stays open). */
    @Override
    public void close() {
      replica.close();
    }
  }

  /**
   * Makes {@code index} a replica of policy {@code p}'s subject and empties it of every rank it
   * restored and every rank in {@code fleet}, through the stream.
   */
  public Feed attach(Policy p, KvIndex index, List<Worker> fleet) {
    NatsEventStream stream = NatsEventStream.forModel(model(p), "default");
    NatsEventPublisher publisher = NatsEventPublisher.create(nc, stream);
    NatsReplica replica = NatsReplica.builder(nc, stream, index).replicaId("simulate").start();
    Feed f = new Feed(stream, replica, publisher);
    if (!replica.awaitReady(WAIT)) {
      f.close();
      throw new IllegalStateException(
          "the replica of "
              + stream.subject()
              + " on "
              + url
              + " was not ready within "
              + WAIT.toSeconds()
              + " s");
    }
    Set<Worker> ranks = new TreeSet<>(fleet);
    for (RouterEvent e : index.dump()) ranks.add(e.worker());
    for (Worker w : ranks) f.accept(new RouterEvent(w, 0, CacheEvent.cleared()));
    return f;
  }

  @Override
  public void close() {
    try {
      nc.close();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
