package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@code mock-engine --exit-with-parent}: an engine whose parent is killed with SIGKILL (which runs
 * no shutdown hook of the parent's) stops by itself, so bench fleet never leaves one behind.
 */
class ExitWithParentTest {

  @Test
  void anEngineEndsWhenItsParentIsKilled() throws Exception {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    String engine =
        String.join(
            " ",
            List.of(
                "'" + java + "'",
                "-Xmx256m",
                "-cp",
                "'" + System.getProperty("java.class.path") + "'",
                Main.class.getName(),
                "mock-engine",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--exit-with-parent"));
    // the shell is the engine's parent (the trailing command keeps it from exec'ing java)
    Process shell =
        new ProcessBuilder("bash", "-c", engine + "; echo engine-exited")
            .redirectErrorStream(true)
            .start();
    ProcessHandle child = null;
    try {
      BufferedReader out =
          new BufferedReader(new InputStreamReader(shell.getInputStream(), StandardCharsets.UTF_8));
      // Helidon's log lines come first (stderr is merged); the engine's line says it serves
      String line;
      do {
        line = out.readLine();
        assertThat(line).as("the engine's output ended before it served").isNotNull();
      } while (!line.contains("kvrouter mock-engine: model"));
      child = shell.toHandle().children().findFirst().orElseThrow();
      assertThat(child.isAlive()).isTrue();
      shell.destroyForcibly(); // SIGKILL: the shell runs nothing more
      assertThat(shell.waitFor(30, TimeUnit.SECONDS)).isTrue();
      // the engine notices its parent's end and stops (a generous bound, not a measurement)
      assertThat(child.onExit().get(60, TimeUnit.SECONDS).isAlive()).isFalse();
    } finally {
      if (child != null) child.destroyForcibly();
      shell.destroyForcibly();
    }
  }
}
