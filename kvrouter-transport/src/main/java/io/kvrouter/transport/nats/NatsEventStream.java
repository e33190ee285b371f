package io.kvrouter.transport.nats;

import io.nats.client.JetStreamApiException;
import io.nats.client.JetStreamManagement;
import io.nats.client.api.DiscardPolicy;
import io.nats.client.api.RetentionPolicy;
import io.nats.client.api.StorageType;
import io.nats.client.api.StreamConfiguration;
import io.nats.client.api.StreamInfo;
import java.io.IOException;
import java.util.Locale;
import java.util.Objects;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * Where router events live on NATS JetStream: the stream, the subject pattern the stream captures
 * (used only when kvrouter creates the stream), and the subject one model's events are published on
 * and consumed from.
 *
 * <p>kvrouter's defaults ({@link #forModel}): stream {@value #DEFAULT_STREAM} capturing {@code
 * kvrouter.events.>}, one subject per model, {@code kvrouter.events.<model>}. Replicas that consume
 * the same subject hold the same index and share snapshots. {@link #dynamo} names the stream and
 * subject the way NVIDIA Dynamo's KV router does, so kvrouter replicas can follow the events of a
 * Dynamo deployment (see {@code docs/ingestion.md}).
 *
 * @param stream the JetStream stream name (no whitespace, {@code .}, {@code *}, {@code >}, {@code
 *     /} or {@code \})
 * @param streamSubjects the subject pattern a stream created by kvrouter captures; it must match
 *     {@code subject}
 * @param subject the concrete subject events are published on (no wildcards)
 */
public record NatsEventStream(String stream, String streamSubjects, String subject) {

  /** The stream kvrouter creates when none is named. */
  public static final String DEFAULT_STREAM = "KVROUTER_EVENTS";

  /** The prefix of kvrouter's per-model subjects; the stream captures {@code kvrouter.events.>}. */
  public static final String DEFAULT_SUBJECT_PREFIX = "kvrouter.events";

  /** The model name used when none is given. */
  public static final String DEFAULT_MODEL = "default";

  public NatsEventStream {
    checkName("stream", stream);
    checkSubject("streamSubjects", streamSubjects, true);
    checkSubject("subject", subject, false);
    if (!Subjects.matches(streamSubjects, subject)) {
      throw new IllegalArgumentException(
          "subject \""
              + subject
              + "\" is not captured by stream subjects \""
              + streamSubjects
              + "\"");
    }
  }

  /**
   * kvrouter's layout: stream {@value #DEFAULT_STREAM} capturing {@code kvrouter.events.>}, events
   * of {@code model} on {@code kvrouter.events.<model>}.
   *
   * @param model a model name that is a valid subject token sequence: no whitespace, {@code *} or
   *     {@code >}, not empty ({@code .} splits it into several tokens, which is fine)
   */
  public static NatsEventStream forModel(String model) {
    Objects.requireNonNull(model, "model");
    return new NatsEventStream(
        DEFAULT_STREAM, DEFAULT_SUBJECT_PREFIX + ".>", DEFAULT_SUBJECT_PREFIX + "." + model);
  }

  /**
   * The subject a kvrouter server publishes and follows one (model, routing group) index on: {@code
   * kvrouter.events.<model>.<group>}, where each name has {@code .}, {@code *}, {@code >} and white
   * space replaced by {@code _} so that it stays one subject token.
   */
  public static NatsEventStream forModel(String modelName, String routingGroup) {
    return forModel(token(modelName) + "." + token(routingGroup));
  }

  private static final Pattern NOT_IN_TOKEN = Pattern.compile("[.*>\\s]");

  private static String token(String s) {
    return NOT_IN_TOKEN.matcher(Objects.requireNonNull(s)).replaceAll("_");
  }

  /** {@link #forModel forModel}({@value #DEFAULT_MODEL}). */
  public static NatsEventStream defaults() {
    return forModel(DEFAULT_MODEL);
  }

  /**
   * NVIDIA Dynamo's layout for the KV events of one component: stream {@code
   * namespace-<namespace>-component-<component>-kv-events} capturing {@code <stream>.*}, events
   * published on {@code <stream>.queue}.
   *
   * <p>Dynamo derives the stream name by slugifying {@code
   * namespace.<ns>.component.<comp>.kv_events} (lower case; characters other than {@code a-z},
   * {@code 0-9} and {@code -} become {@code -}). Some Dynamo releases append a hash to their slugs;
   * when in doubt, read the stream's real name with {@code nats stream ls} and use the canonical
   * constructor.
   */
  public static NatsEventStream dynamo(String namespace, String component) {
    Objects.requireNonNull(namespace, "namespace");
    Objects.requireNonNull(component, "component");
    String stream =
        slug("namespace." + namespace + ".component." + component + ".kv_events").replace('_', '-');
    return new NatsEventStream(stream, stream + ".*", stream + ".queue");
  }

  /**
   * Creates the stream when it does not exist (file storage, limits retention, no size or age
   * limit: snapshots purge it) and returns its info; an existing stream is left as it is.
   *
   * @throws IllegalStateException when an existing stream of that name does not capture {@link
   *     #subject}
   */
  public StreamInfo ensure(JetStreamManagement jsm) throws IOException, JetStreamApiException {
    StreamInfo info = lookup(jsm);
    if (info == null) {
      try {
        return jsm.addStream(
            StreamConfiguration.builder()
                .name(stream)
                .subjects(streamSubjects)
                .storageType(StorageType.File)
                .retentionPolicy(RetentionPolicy.Limits)
                .discardPolicy(DiscardPolicy.Old)
                .build());
      } catch (JetStreamApiException e) {
        // another process created it first: use theirs
        info = lookup(jsm);
        if (info == null) throw e;
      }
    }
    boolean captured = false;
    for (String s : info.getConfiguration().getSubjects()) {
      captured |= Subjects.matches(s, subject);
    }
    if (!captured) {
      throw new IllegalStateException(
          "stream "
              + stream
              + " captures "
              + info.getConfiguration().getSubjects()
              + ", not the event subject "
              + subject);
    }
    return info;
  }

  private @Nullable StreamInfo lookup(JetStreamManagement jsm)
      throws IOException, JetStreamApiException {
    try {
      return jsm.getStreamInfo(stream);
    } catch (JetStreamApiException e) {
      if (e.getApiErrorCode() == Subjects.STREAM_NOT_FOUND) return null;
      throw e;
    }
  }

  static String slug(String s) {
    StringBuilder sb = new StringBuilder(s.length());
    for (char c : s.toLowerCase(Locale.ROOT).toCharArray()) {
      sb.append((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ? c : '_');
    }
    return sb.toString();
  }

  private static void checkName(String what, String name) {
    Objects.requireNonNull(name, what);
    if (name.isEmpty()) throw new IllegalArgumentException(what + " must not be empty");
    for (int i = 0; i < name.length(); i++) {
      char c = name.charAt(i);
      if (c <= ' ' || c == '.' || c == '*' || c == '>' || c == '/' || c == '\\' || c == 127) {
        throw new IllegalArgumentException(
            what
                + " \""
                + name
                + "\" contains '"
                + c
                + "' (whitespace, . * > / \\ are not allowed)");
      }
    }
  }

  private static void checkSubject(String what, String subject, boolean wildcards) {
    Objects.requireNonNull(subject, what);
    String problem = Subjects.problem(subject, wildcards);
    if (problem != null) {
      throw new IllegalArgumentException(what + " \"" + subject + "\": " + problem);
    }
  }
}
