package io.kvrouter.gateway;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * Debian's headless {@code chromium} for the {@code *ChromiumIT} tests: renders one page, offline,
 * and gives its DOM after the page's scripts ran (and a screenshot). The binary is the system
 * property {@code kvrouter.chromium}, or the environment's {@code KVROUTER_CHROMIUM}, or {@code
 * chromium} on the PATH (.ci/run installs it with apt-get). Without it the tests fail, saying how
 * to get it, unless {@code -Dkvrouter.chromium.skip=true} leaves them out on purpose.
 */
final class Chromium {
  final Path binary;

  private Chromium(Path binary) {
    this.binary = binary;
  }

  /** The installed chromium; fails the test (see the class comment) when missing. */
  static Chromium require() {
    Assumptions.assumeFalse(
        Boolean.getBoolean("kvrouter.chromium.skip"),
        "chromium tests left out on purpose (-Dkvrouter.chromium.skip=true)");
    String s = System.getProperty("kvrouter.chromium");
    if (s == null || s.isBlank()) s = System.getenv("KVROUTER_CHROMIUM");
    Path p = s == null || s.isBlank() ? onPath("chromium") : Path.of(s);
    if (!Files.isExecutable(p)) {
      fail(
          "chromium "
              + p
              + " is not installed: the dashboard test renders the page in Debian's headless"
              + " chromium (apt-get install chromium; .ci/run does it), or give its path as"
              + " KVROUTER_CHROMIUM (-Dkvrouter.chromium=), or pass -Dkvrouter.chromium.skip=true"
              + " to leave these tests out.");
    }
    return new Chromium(p);
  }

  /** The first executable {@code name} on the PATH, else /usr/bin/{@code name}. */
  private static Path onPath(String name) {
    String path = System.getenv("PATH");
    if (path != null) {
      for (String dir : path.split(File.pathSeparator)) {
        if (dir.isEmpty()) continue;
        Path p = Path.of(dir, name);
        if (Files.isExecutable(p)) return p;
      }
    }
    return Path.of("/usr/bin", name);
  }

  /**
   * Loads {@code url} headless, lets its scripts run for {@code virtualMillis} of virtual time,
   * saves a {@code width}x{@code height} screenshot to {@code screenshot} and returns the DOM. No
   * network but loopback: every other address goes to a proxy that does not exist, so a page that
   * fetched anything from elsewhere would show it. A fresh profile in {@code profile}.
   */
  String render(String url, int virtualMillis, Path screenshot, int width, int height, Path profile)
      throws IOException, InterruptedException {
    Path dom = profile.resolve("dom.html");
    Path log = profile.resolve("chromium.log");
    List<String> cmd =
        List.of(
            binary.toString(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-extensions",
            "--disable-sync",
            "--disable-default-apps",
            "--proxy-server=http://127.0.0.1:9",
            "--user-data-dir=" + profile.resolve("profile"),
            "--window-size=" + width + "," + height,
            "--virtual-time-budget=" + virtualMillis,
            "--screenshot=" + screenshot.toAbsolutePath(),
            "--dump-dom",
            url);
    Process p =
        new ProcessBuilder(cmd).redirectOutput(dom.toFile()).redirectError(log.toFile()).start();
    if (!p.waitFor(180, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      fail("chromium did not finish rendering " + url + " within 180 s; its log: " + log);
    }
    if (p.exitValue() != 0) {
      fail("chromium exited with " + p.exitValue() + ": " + Files.readString(log));
    }
    return Files.readString(dom, StandardCharsets.UTF_8);
  }
}
