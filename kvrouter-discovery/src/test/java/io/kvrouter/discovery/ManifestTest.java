package io.kvrouter.discovery;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.ServiceAccount;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.rbac.PolicyRule;
import io.fabric8.kubernetes.api.model.rbac.Role;
import io.fabric8.kubernetes.api.model.rbac.RoleBinding;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import io.kvrouter.route.EngineRole;
import java.io.IOException;
import java.io.StringReader;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The manifests under deploy/: every one parses with the fabric8 client's typed model with no field
 * left over (a misspelt or misplaced field fails), the Roles grant exactly what the discovery
 * calls, and the pieces refer to each other (service account, config file, ports, pool name,
 * labels, the annotated vLLM pods) as they must.
 */
class ManifestTest {
  private static final Path DEPLOY =
      Path.of(System.getProperty("basedir", ".")).toAbsolutePath().resolve("../deploy").normalize();
  private static final KubernetesSerialization SERIALIZATION = new KubernetesSerialization();
  private static final Map<Path, Object> MANIFESTS = new TreeMap<>();

  @BeforeAll
  static void load() throws IOException {
    try (Stream<Path> files = Files.walk(DEPLOY)) {
      for (Path f : files.filter(p -> p.toString().endsWith(".yaml")).sorted().toList()) {
        if (f.getFileName().toString().equals("kustomization.yaml")) continue;
        MANIFESTS.put(DEPLOY.relativize(f), SERIALIZATION.unmarshal(Files.readString(f)));
      }
    }
    assertThat(MANIFESTS.keySet()).hasSize(11);
  }

  @SuppressWarnings("unchecked")
  private static <T> T get(String path, Class<T> type) {
    Object o = MANIFESTS.get(Path.of(path));
    assertThat(o).as(path).isInstanceOf(type);
    return (T) o;
  }

  @Test
  void everyManifestParsesWithNoUnknownField() {
    for (Map.Entry<Path, Object> e : MANIFESTS.entrySet()) {
      Object o = e.getValue();
      assertThat(o).as(e.getKey().toString()).isInstanceOf(HasMetadata.class);
      if (o instanceof GenericKubernetesResource g) {
        // the one custom resource: read as the discovery reads it, and only v1 fields
        assertThat(g.getKind()).as(e.getKey().toString()).isEqualTo("InferencePool");
        assertThat(g.getApiVersion()).isEqualTo("inference.networking.k8s.io/v1");
        Map<?, ?> spec = (Map<?, ?>) g.getAdditionalProperties().get("spec");
        assertThat(g.getAdditionalProperties().keySet()).containsOnly("spec");
        assertThat(spec.keySet().stream().map(String::valueOf).toList())
            .isSubsetOf("selector", "targetPorts", "appProtocol", "endpointPickerRef");
        PoolTarget.of(g);
      } else {
        List<String> unknown = new ArrayList<>();
        unknownFields(o, e.getKey().toString(), unknown);
        assertThat(unknown).as("fields the typed model does not know").isEmpty();
      }
    }
  }

  /** Every non-empty additionalProperties under {@code o}: fields the model does not have. */
  private static void unknownFields(Object o, String path, List<String> out) {
    if (o == null) return;
    if (o instanceof List<?> l) {
      for (int i = 0; i < l.size(); i++) unknownFields(l.get(i), path + "[" + i + "]", out);
      return;
    }
    if (o instanceof Map<?, ?> m) {
      for (Map.Entry<?, ?> e : m.entrySet())
        unknownFields(e.getValue(), path + "." + e.getKey(), out);
      return;
    }
    if (!o.getClass().getName().startsWith("io.fabric8.kubernetes.api.model")) return;
    for (Method m : o.getClass().getMethods()) {
      if (m.getParameterCount() != 0
          || Modifier.isStatic(m.getModifiers())
          || !m.getName().startsWith("get")
          || m.getDeclaringClass() == Object.class) {
        continue;
      }
      Object v;
      try {
        v = m.invoke(o);
      } catch (IllegalAccessException | InvocationTargetException ex) {
        throw new LinkageError(ex.getMessage(), ex);
      }
      if (m.getName().equals("getAdditionalProperties")) {
        Map<?, ?> extra = (Map<?, ?>) v;
        if (extra != null && !extra.isEmpty()) out.add(path + ": " + extra.keySet());
      } else {
        unknownFields(v, path + "." + m.getName().substring(3), out);
      }
    }
  }

  private static Map<String, Set<String>> grants(Role role) {
    Map<String, Set<String>> out = new TreeMap<>();
    for (PolicyRule r : role.getRules()) {
      for (String group : r.getApiGroups()) {
        for (String res : r.getResources()) {
          out.computeIfAbsent(group.isEmpty() ? res : res + "." + group, k -> new TreeSet<>())
              .addAll(r.getVerbs());
        }
      }
    }
    return out;
  }

  @Test
  void theRolesGrantExactlyWhatTheDiscoveryCalls() {
    Role base = get("base/role.yaml", Role.class);
    assertThat(grants(base)).isEqualTo(KubernetesDiscovery.REQUIRED_RBAC);
    assertThat(base.getRules()).allSatisfy(r -> assertThat(r.getResourceNames()).isEmpty());
    Role pool = get("overlays/inference-pool/role-inferencepool.yaml", Role.class);
    assertThat(grants(pool)).isEqualTo(KubernetesDiscovery.REQUIRED_RBAC_INFERENCE_POOL);
    // limited to the one pool the gateway is configured with
    String poolName =
        config("overlays/inference-pool/configmap-patch.yaml")
            .getProperty("discovery-inference-pool");
    assertThat(pool.getRules())
        .singleElement()
        .satisfies(r -> assertThat(r.getResourceNames()).containsExactly(poolName));
    assertThat(
            get("examples/inferencepool.yaml", GenericKubernetesResource.class)
                .getMetadata()
                .getName())
        .isEqualTo(poolName);

    ServiceAccount sa = get("base/serviceaccount.yaml", ServiceAccount.class);
    for (String binding :
        List.of(
            "base/rolebinding.yaml", "overlays/inference-pool/rolebinding-inferencepool.yaml")) {
      RoleBinding b = get(binding, RoleBinding.class);
      assertThat(b.getSubjects())
          .singleElement()
          .satisfies(
              s -> {
                assertThat(s.getKind()).isEqualTo("ServiceAccount");
                assertThat(s.getName()).isEqualTo(sa.getMetadata().getName());
                // left to the kustomization's namespace, which kustomize writes in
                assertThat(s.getNamespace()).isNull();
              });
      assertThat(b.getRoleRef().getKind()).isEqualTo("Role");
    }
    assertThat(get("base/rolebinding.yaml", RoleBinding.class).getRoleRef().getName())
        .isEqualTo(base.getMetadata().getName());
    assertThat(
            get("overlays/inference-pool/rolebinding-inferencepool.yaml", RoleBinding.class)
                .getRoleRef()
                .getName())
        .isEqualTo(pool.getMetadata().getName());
  }

  private static Properties config(String configMap) {
    ConfigMap cm = get(configMap, ConfigMap.class);
    assertThat(cm.getData()).containsOnlyKeys("gateway.properties");
    Properties p = new Properties();
    try {
      p.load(new StringReader(cm.getData().get("gateway.properties")));
    } catch (IOException e) {
      throw new AssertionError(e);
    }
    return p;
  }

  @Test
  void theGatewayDeploymentRunsWithItsAccountConfigAndProbes() {
    Deployment d = get("base/deployment.yaml", Deployment.class);
    var spec = d.getSpec().getTemplate().getSpec();
    assertThat(spec.getServiceAccountName())
        .isEqualTo(get("base/serviceaccount.yaml", ServiceAccount.class).getMetadata().getName());
    Container c = spec.getContainers().get(0);
    assertThat(c.getReadinessProbe().getHttpGet().getPath()).isEqualTo("/ready");
    assertThat(c.getLivenessProbe().getHttpGet().getPath()).isEqualTo("/health");
    List<String> args = c.getArgs();
    assertThat(args.get(0)).isEqualTo("gateway");
    String configFile = args.get(args.indexOf("--config") + 1);
    assertThat(args.get(args.indexOf("--discovery-namespace") + 1)).isEqualTo("$(POD_NAMESPACE)");
    assertThat(c.getEnv())
        .anySatisfy(
            e -> {
              assertThat(e.getName()).isEqualTo("POD_NAMESPACE");
              assertThat(e.getValueFrom().getFieldRef().getFieldPath())
                  .isEqualTo("metadata.namespace");
            });
    // the config file is the ConfigMap's key, mounted where --config points
    var mount = c.getVolumeMounts().get(0);
    assertThat(configFile).isEqualTo(mount.getMountPath() + "/gateway.properties");
    var volume =
        spec.getVolumes().stream()
            .filter(v -> v.getName().equals(mount.getName()))
            .findFirst()
            .orElseThrow();
    assertThat(volume.getConfigMap().getName())
        .isEqualTo(get("base/configmap.yaml", ConfigMap.class).getMetadata().getName())
        .isEqualTo(
            get("overlays/inference-pool/configmap-patch.yaml", ConfigMap.class)
                .getMetadata()
                .getName());
    // the port the probes and the Service use is the one the gateway listens on
    Properties base = config("base/configmap.yaml");
    assertThat(c.getPorts())
        .singleElement()
        .satisfies(
            p -> {
              assertThat(p.getName()).isEqualTo("http");
              assertThat(p.getContainerPort())
                  .isEqualTo(Integer.parseInt(base.getProperty("port")));
            });
    assertThat(base.getProperty("host")).isEqualTo("0.0.0.0");
    Service svc = get("base/service.yaml", Service.class);
    assertThat(svc.getSpec().getSelector())
        .isEqualTo(d.getSpec().getTemplate().getMetadata().getLabels());
    assertThat(svc.getSpec().getPorts().get(0).getTargetPort().getStrVal()).isEqualTo("http");
    // streams in flight finish before the kubelet kills the container
    assertThat(spec.getTerminationGracePeriodSeconds())
        .isGreaterThan(Long.parseLong(base.getProperty("shutdown-grace-seconds")));
  }

  @Test
  void theVllmExampleIsWhatTheConfigSelectsAndItsPodsAreValidEngines() {
    Deployment vllm = get("examples/vllm-deployment.yaml", Deployment.class);
    Map<String, String> labels = vllm.getSpec().getTemplate().getMetadata().getLabels();
    Properties base = config("base/configmap.yaml");
    Properties pool = config("overlays/inference-pool/configmap-patch.yaml");
    assertThat(base.getProperty("discovery")).isEqualTo("kubernetes");
    assertThat(pool.getProperty("discovery")).isEqualTo("kubernetes");
    // the selector of the base config and the pool's matchLabels select the example's pods
    assertThat(LabelSelector.parse(base.getProperty("discovery-selector")))
        .isEqualTo(LabelSelector.ofMatchLabels(labels));
    PoolTarget target =
        PoolTarget.of(get("examples/inferencepool.yaml", GenericKubernetesResource.class));
    assertThat(target.selector()).isEqualTo(LabelSelector.ofMatchLabels(labels));

    // a pod of the template, Ready: the discovery finds one engine of the configured model, on
    // the ports vLLM is told to use
    Pod pod =
        new PodBuilder()
            .withMetadata(vllm.getSpec().getTemplate().getMetadata())
            .editMetadata()
            .withName("vllm-qwen3-0")
            .withNamespace("llm")
            .withUid("6a1b3a57-8c0e-4d1f-9e35-5c3c4d1b2a10")
            .endMetadata()
            .withSpec(vllm.getSpec().getTemplate().getSpec())
            .withNewStatus()
            .withPodIP("10.0.0.7")
            .withConditions(Pods.ready(true))
            .endStatus()
            .build();
    DiscoveryConfig config =
        DiscoveryConfig.labelSelector("llm", base.getProperty("discovery-selector"))
            .withDefaults(
                base.getProperty("model"),
                Integer.parseInt(base.getProperty("block-size")),
                EngineRole.BOTH);
    PodEngines.Result r = PodEngines.of(pod, config, null);
    assertThat(r.invalid()).isNull();
    DiscoveredEngine e = r.engines().get(0);
    assertThat(r.engines()).hasSize(1);
    assertThat(e.model()).isEqualTo(base.getProperty("model"));
    assertThat(e.blockSize()).isEqualTo(Integer.parseInt(base.getProperty("block-size")));
    List<String> args = vllm.getSpec().getTemplate().getSpec().getContainers().get(0).getArgs();
    assertThat(args).contains("--served-model-name=" + e.model(), "--block-size=" + e.blockSize());
    assertThat(e.baseUrl()).isEqualTo("http://10.0.0.7:" + flag(args, "--port"));
    String kvEvents = flag(args, "--kv-events-config");
    assertThat(port(kvEvents, "endpoint"))
        .isEqualTo(e.eventsEndpoint().substring(e.eventsEndpoint().lastIndexOf(':') + 1));
    assertThat(port(kvEvents, "replay_endpoint"))
        .isEqualTo(e.replayEndpoint().substring(e.replayEndpoint().lastIndexOf(':') + 1));
    assertThat(PodEngines.of(pod, config, target.ports()).engines().get(0).baseUrl())
        .isEqualTo(e.baseUrl());
  }

  private static String flag(List<String> args, String name) {
    return args.stream()
        .filter(a -> a.startsWith(name + "="))
        .findFirst()
        .orElseThrow()
        .substring(name.length() + 1);
  }

  private static String port(String json, String field) {
    Matcher m = Pattern.compile("\"" + field + "\":\"tcp://\\*:(\\d+)\"").matcher(json);
    assertThat(m.find()).as(field + " in " + json).isTrue();
    return m.group(1);
  }

  @Test
  @SuppressWarnings("unchecked")
  void kustomizationsReferToFilesThatExist() throws IOException {
    for (String k :
        List.of("base/kustomization.yaml", "overlays/inference-pool/kustomization.yaml")) {
      Path file = DEPLOY.resolve(k);
      Map<String, Object> kz =
          SERIALIZATION.unmarshal(Files.readString(file, StandardCharsets.UTF_8), Map.class);
      assertThat(kz.keySet()).isSubsetOf("apiVersion", "kind", "namespace", "resources", "patches");
      assertThat(kz.get("kind")).isEqualTo("Kustomization");
      assertThat(kz.get("namespace")).isEqualTo("llm");
      for (Object r : (List<?>) kz.get("resources")) {
        Path p = file.getParent().resolve(String.valueOf(r)).normalize();
        if (Files.isDirectory(p)) {
          assertThat(p.resolve("kustomization.yaml")).exists();
        } else {
          assertThat(p).as(k + " resource").exists();
        }
      }
      if (kz.containsKey("patches")) {
        for (Object patch : (List<?>) kz.get("patches")) {
          Path p = file.getParent().resolve(String.valueOf(((Map<?, ?>) patch).get("path")));
          assertThat(p).exists();
          // a patch must name a resource the base has
          HasMetadata target = (HasMetadata) MANIFESTS.get(DEPLOY.relativize(p));
          assertThat(MANIFESTS.entrySet())
              .anySatisfy(
                  e -> {
                    assertThat(e.getKey().startsWith("base")).isTrue();
                    assertThat(((HasMetadata) e.getValue()).getKind()).isEqualTo(target.getKind());
                    assertThat(((HasMetadata) e.getValue()).getMetadata().getName())
                        .isEqualTo(target.getMetadata().getName());
                  });
        }
      }
    }
  }
}
