package io.kvrouter.sim.trace;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Finds the trace to replay: the one given, else the bundled conversation trace from the
 * repository's {@code data/} directory (found through the {@code kvrouter.home} system property
 * that the {@code ./kvrouter} launcher sets), else the copy inside the jar.
 */
public final class TraceSource {
  static final String BUNDLED = "data/conversation_trace.jsonl.gz";

  private TraceSource() {}

  /** The requests of the trace, at most {@code limit}; {@code path} null means the bundled one. */
  public static Loaded load(Path path, int limit) {
    if (path != null) {
      return new Loaded(path.toString(), TraceReader.read(path, limit));
    }
    String home = System.getProperty("kvrouter.home");
    if (home != null) {
      Path p = Path.of(home).resolve(BUNDLED);
      if (Files.isRegularFile(p)) return new Loaded(BUNDLED, TraceReader.read(p, limit));
    }
    try (InputStream in = TraceSource.class.getResourceAsStream("/" + BUNDLED)) {
      if (in == null) {
        throw new TraceFormatException(
            "the bundled trace "
                + BUNDLED
                + " is neither in the repository nor in the jar; pass one with --trace",
            null);
      }
      return new Loaded(BUNDLED + " (from the jar)", TraceReader.read(in, BUNDLED, limit));
    } catch (IOException e) {
      throw new TraceFormatException("cannot read the bundled trace: " + e, e);
    }
  }

  /** A trace read into memory, with the name it is reported under. */
  public record Loaded(String name, List<TraceRequest> requests) {}
}
