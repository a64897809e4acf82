"""The protobuf schema of the API kinds kubectl v1.37.1 sends, for
nodeagent_testbed.sim.protobuf.

GENERATED from the Go struct tags in the kubectl binary; do not edit. Regenerate with
    python -m tools.kubectl_schema > testbed/nodeagent_testbed/sim/protobuf_schema.py

SCHEMA maps a message to {field number: F(json name, kind, message, ...)}:
  rep     repeated (a list in JSON)
  ptr     a Go pointer: kept whenever present on the wire, even when zero
  req     no omitempty in its json tag: emitted even when zero
  inline  an embedded Go struct: its fields are merged into the parent object
  value   for MAP, the kind of the map values (keys are strings)
Scalars without ptr or req are omitted when zero, as encoding/json's omitempty does.
"""

from __future__ import annotations

from typing import Final, NamedTuple

STRING: Final = "string"
BYTES: Final = "bytes"
BOOL: Final = "bool"
INT32: Final = "int32"
INT64: Final = "int64"
DOUBLE: Final = "double"
MESSAGE: Final = "message"
MAP: Final = "map"


class F(NamedTuple):
    """One field of a message."""

    json: str
    kind: str
    message: str | None = None
    value: str | None = None
    rep: bool = False
    ptr: bool = False
    req: bool = False
    inline: bool = False


# (apiVersion, kind) of a top-level object -> its message
KINDS: Final[dict[tuple[str, str], str]] = {
    ("v1", "Namespace"): "Namespace",
    ("v1", "Node"): "Node",
    ("v1", "Pod"): "Pod",
    ("v1", "Event"): "Event",
    ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Secret"): "Secret",
    ("v1", "Service"): "Service",
    ("v1", "ServiceAccount"): "ServiceAccount",
    ("v1", "Binding"): "Binding",
    ("apps/v1", "Deployment"): "Deployment",
    ("apps/v1", "ReplicaSet"): "ReplicaSet",
    ("apps/v1", "StatefulSet"): "StatefulSet",
    ("apps/v1", "DaemonSet"): "DaemonSet",
    ("policy/v1", "PodDisruptionBudget"): "PodDisruptionBudget",
    ("policy/v1", "Eviction"): "Eviction",
    ("autoscaling/v1", "Scale"): "Scale",
    ("coordination.k8s.io/v1", "Lease"): "Lease",
    ("scheduling.k8s.io/v1", "PriorityClass"): "PriorityClass",
    ("events.k8s.io/v1", "Event"): "events.k8s.io/v1.Event",
    ("meta.k8s.io/v1", "DeleteOptions"): "DeleteOptions",
}

SCHEMA: Final[dict[str, dict[int, F]]] = {
    # k8s.io/api/core/v1.Namespace
    "Namespace": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("spec", MESSAGE, "NamespaceSpec"),
        3: F("status", MESSAGE, "NamespaceStatus"),
    },
    # k8s.io/apimachinery/pkg/apis/meta/v1.ObjectMeta
    "ObjectMeta": {
        1: F("name", STRING),
        2: F("generateName", STRING),
        3: F("namespace", STRING),
        4: F("selfLink", STRING),
        5: F("uid", STRING),
        6: F("resourceVersion", STRING),
        7: F("generation", INT64),
        8: F("creationTimestamp", MESSAGE, "Time"),
        9: F("deletionTimestamp", MESSAGE, "Time", ptr=True),
        10: F("deletionGracePeriodSeconds", INT64, ptr=True),
        11: F("labels", MAP, value=STRING),
        12: F("annotations", MAP, value=STRING),
        13: F("ownerReferences", MESSAGE, "OwnerReference", rep=True),
        14: F("finalizers", STRING, rep=True),
        17: F("managedFields", MESSAGE, "ManagedFieldsEntry", rep=True),
    },
    # k8s.io/apimachinery/pkg/apis/meta/v1.OwnerReference
    "OwnerReference": {
        1: F("kind", STRING, req=True),
        3: F("name", STRING, req=True),
        4: F("uid", STRING, req=True),
        5: F("apiVersion", STRING, req=True),
        6: F("controller", BOOL, ptr=True),
        7: F("blockOwnerDeletion", BOOL, ptr=True),
    },
    # k8s.io/apimachinery/pkg/apis/meta/v1.ManagedFieldsEntry
    "ManagedFieldsEntry": {
        1: F("manager", STRING),
        2: F("operation", STRING),
        3: F("apiVersion", STRING),
        4: F("time", MESSAGE, "Time", ptr=True),
        6: F("fieldsType", STRING),
        7: F("fieldsV1", MESSAGE, "FieldsV1", ptr=True),
        8: F("subresource", STRING),
    },
    # k8s.io/api/core/v1.NamespaceSpec
    "NamespaceSpec": {
        1: F("finalizers", STRING, rep=True),
    },
    # k8s.io/api/core/v1.NamespaceStatus
    "NamespaceStatus": {
        1: F("phase", STRING),
        2: F("conditions", MESSAGE, "NamespaceCondition", rep=True),
    },
    # k8s.io/api/core/v1.NamespaceCondition
    "NamespaceCondition": {
        1: F("type", STRING, req=True),
        2: F("status", STRING, req=True),
        4: F("lastTransitionTime", MESSAGE, "Time"),
        5: F("reason", STRING),
        6: F("message", STRING),
    },
    # k8s.io/api/core/v1.Node
    "Node": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("spec", MESSAGE, "NodeSpec"),
        3: F("status", MESSAGE, "NodeStatus"),
    },
    # k8s.io/api/core/v1.NodeSpec
    "NodeSpec": {
        1: F("podCIDR", STRING),
        2: F("externalID", STRING),
        3: F("providerID", STRING),
        4: F("unschedulable", BOOL),
        5: F("taints", MESSAGE, "Taint", rep=True),
        6: F("configSource", MESSAGE, "NodeConfigSource", ptr=True),
        7: F("podCIDRs", STRING, rep=True),
        8: F("podPreemptionPolicy", MESSAGE, "NodePodPreemptionPolicy", ptr=True),
    },
    # k8s.io/api/core/v1.Taint
    "Taint": {
        1: F("key", STRING, req=True),
        2: F("value", STRING),
        3: F("effect", STRING, req=True),
        4: F("timeAdded", MESSAGE, "Time", ptr=True),
    },
    # k8s.io/api/core/v1.NodeConfigSource
    "NodeConfigSource": {
        2: F("configMap", MESSAGE, "ConfigMapNodeConfigSource", ptr=True),
    },
    # k8s.io/api/core/v1.ConfigMapNodeConfigSource
    "ConfigMapNodeConfigSource": {
        1: F("namespace", STRING, req=True),
        2: F("name", STRING, req=True),
        3: F("uid", STRING),
        4: F("resourceVersion", STRING),
        5: F("kubeletConfigKey", STRING, req=True),
    },
    # k8s.io/api/core/v1.NodePodPreemptionPolicy
    "NodePodPreemptionPolicy": {
        1: F("disableResizePreemption", STRING, rep=True),
    },
    # k8s.io/api/core/v1.NodeStatus
    "NodeStatus": {
        1: F("capacity", MAP, "Quantity", value=MESSAGE),
        2: F("allocatable", MAP, "Quantity", value=MESSAGE),
        3: F("phase", STRING),
        4: F("conditions", MESSAGE, "NodeCondition", rep=True),
        5: F("addresses", MESSAGE, "NodeAddress", rep=True),
        6: F("daemonEndpoints", MESSAGE, "NodeDaemonEndpoints"),
        7: F("nodeInfo", MESSAGE, "NodeSystemInfo"),
        8: F("images", MESSAGE, "ContainerImage", rep=True),
        9: F("volumesInUse", STRING, rep=True),
        10: F("volumesAttached", MESSAGE, "AttachedVolume", rep=True),
        11: F("config", MESSAGE, "NodeConfigStatus", ptr=True),
        12: F("runtimeHandlers", MESSAGE, "NodeRuntimeHandler", rep=True),
        13: F("features", MESSAGE, "NodeFeatures", ptr=True),
        14: F("declaredFeatures", STRING, rep=True),
    },
    # k8s.io/api/core/v1.NodeCondition
    "NodeCondition": {
        1: F("type", STRING, req=True),
        2: F("status", STRING, req=True),
        3: F("lastHeartbeatTime", MESSAGE, "Time"),
        4: F("lastTransitionTime", MESSAGE, "Time"),
        5: F("reason", STRING),
        6: F("message", STRING),
    },
    # k8s.io/api/core/v1.NodeAddress
    "NodeAddress": {
        1: F("type", STRING, req=True),
        2: F("address", STRING, req=True),
    },
    # k8s.io/api/core/v1.NodeDaemonEndpoints
    "NodeDaemonEndpoints": {
        1: F("kubeletEndpoint", MESSAGE, "DaemonEndpoint"),
    },
    # k8s.io/api/core/v1.DaemonEndpoint
    "DaemonEndpoint": {
        1: F("Port", INT32, req=True),
    },
    # k8s.io/api/core/v1.NodeSystemInfo
    "NodeSystemInfo": {
        1: F("machineID", STRING, req=True),
        2: F("systemUUID", STRING, req=True),
        3: F("bootID", STRING, req=True),
        4: F("kernelVersion", STRING, req=True),
        5: F("osImage", STRING, req=True),
        6: F("containerRuntimeVersion", STRING, req=True),
        7: F("kubeletVersion", STRING, req=True),
        8: F("kubeProxyVersion", STRING, req=True),
        9: F("operatingSystem", STRING, req=True),
        10: F("architecture", STRING, req=True),
        11: F("swap", MESSAGE, "NodeSwapStatus", ptr=True),
        12: F("runningInUserNamespace", BOOL, ptr=True),
    },
    # k8s.io/api/core/v1.NodeSwapStatus
    "NodeSwapStatus": {
        1: F("capacity", INT64, ptr=True),
    },
    # k8s.io/api/core/v1.ContainerImage
    "ContainerImage": {
        1: F("names", STRING, rep=True),
        2: F("sizeBytes", INT64),
    },
    # k8s.io/api/core/v1.AttachedVolume
    "AttachedVolume": {
        1: F("name", STRING, req=True),
        2: F("devicePath", STRING, req=True),
    },
    # k8s.io/api/core/v1.NodeConfigStatus
    "NodeConfigStatus": {
        1: F("assigned", MESSAGE, "NodeConfigSource", ptr=True),
        2: F("active", MESSAGE, "NodeConfigSource", ptr=True),
        3: F("lastKnownGood", MESSAGE, "NodeConfigSource", ptr=True),
        4: F("error", STRING),
    },
    # k8s.io/api/core/v1.NodeRuntimeHandler
    "NodeRuntimeHandler": {
        1: F("name", STRING, req=True),
        2: F("features", MESSAGE, "NodeRuntimeHandlerFeatures", ptr=True),
    },
    # k8s.io/api/core/v1.NodeRuntimeHandlerFeatures
    "NodeRuntimeHandlerFeatures": {
        1: F("recursiveReadOnlyMounts", BOOL, ptr=True),
        2: F("userNamespaces", BOOL, ptr=True),
    },
    # k8s.io/api/core/v1.NodeFeatures
    "NodeFeatures": {
        1: F("supplementalGroupsPolicy", BOOL, ptr=True),
    },
    # k8s.io/api/core/v1.Pod
    "Pod": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("spec", MESSAGE, "PodSpec"),
        3: F("status", MESSAGE, "PodStatus"),
    },
    # k8s.io/api/core/v1.PodSpec
    "PodSpec": {
        1: F("volumes", MESSAGE, "Volume", rep=True),
        2: F("containers", MESSAGE, "Container", rep=True),
        3: F("restartPolicy", STRING),
        4: F("terminationGracePeriodSeconds", INT64, ptr=True),
        5: F("activeDeadlineSeconds", INT64, ptr=True),
        6: F("dnsPolicy", STRING),
        7: F("nodeSelector", MAP, value=STRING),
        8: F("serviceAccountName", STRING),
        9: F("serviceAccount", STRING),
        10: F("nodeName", STRING),
        11: F("hostNetwork", BOOL),
        12: F("hostPID", BOOL),
        13: F("hostIPC", BOOL),
        14: F("securityContext", MESSAGE, "PodSecurityContext", ptr=True),
        15: F("imagePullSecrets", MESSAGE, "LocalObjectReference", rep=True),
        16: F("hostname", STRING),
        17: F("subdomain", STRING),
        18: F("affinity", MESSAGE, "Affinity", ptr=True),
        19: F("schedulerName", STRING),
        20: F("initContainers", MESSAGE, "Container", rep=True),
        21: F("automountServiceAccountToken", BOOL, ptr=True),
        22: F("tolerations", MESSAGE, "Toleration", rep=True),
        23: F("hostAliases", MESSAGE, "HostAlias", rep=True),
        24: F("priorityClassName", STRING),
        25: F("priority", INT32, ptr=True),
        26: F("dnsConfig", MESSAGE, "PodDNSConfig", ptr=True),
        27: F("shareProcessNamespace", BOOL, ptr=True),
        28: F("readinessGates", MESSAGE, "PodReadinessGate", rep=True),
        29: F("runtimeClassName", STRING, ptr=True),
        30: F("enableServiceLinks", BOOL, ptr=True),
        31: F("preemptionPolicy", STRING, ptr=True),
        32: F("overhead", MAP, "Quantity", value=MESSAGE),
        33: F("topologySpreadConstraints", MESSAGE, "TopologySpreadConstraint", rep=True),
        34: F("ephemeralContainers", MESSAGE, "EphemeralContainer", rep=True),
        35: F("setHostnameAsFQDN", BOOL, ptr=True),
        36: F("os", MESSAGE, "PodOS", ptr=True),
        37: F("hostUsers", BOOL, ptr=True),
        38: F("schedulingGates", MESSAGE, "PodSchedulingGate", rep=True),
        39: F("resourceClaims", MESSAGE, "PodResourceClaim", rep=True),
        40: F("resources", MESSAGE, "ResourceRequirements", ptr=True),
        41: F("hostnameOverride", STRING, ptr=True),
        43: F("schedulingGroup", MESSAGE, "PodSchedulingGroup", ptr=True),
        44: F("evictionResponders", MESSAGE, "EvictionResponder", rep=True),
    },
    # k8s.io/api/core/v1.Volume
    "Volume": {
        1: F("name", STRING, req=True),
        2: F("", MESSAGE, "VolumeSource", inline=True),
    },
    # k8s.io/api/core/v1.VolumeSource
    "VolumeSource": {
        1: F("hostPath", MESSAGE, "HostPathVolumeSource", ptr=True),
        2: F("emptyDir", MESSAGE, "EmptyDirVolumeSource", ptr=True),
        3: F("gcePersistentDisk", MESSAGE, "GCEPersistentDiskVolumeSource", ptr=True),
        4: F("awsElasticBlockStore", MESSAGE, "AWSElasticBlockStoreVolumeSource", ptr=True),
        5: F("gitRepo", MESSAGE, "GitRepoVolumeSource", ptr=True),
        6: F("secret", MESSAGE, "SecretVolumeSource", ptr=True),
        7: F("nfs", MESSAGE, "NFSVolumeSource", ptr=True),
        8: F("iscsi", MESSAGE, "ISCSIVolumeSource", ptr=True),
        9: F("glusterfs", MESSAGE, "GlusterfsVolumeSource", ptr=True),
        10: F("persistentVolumeClaim", MESSAGE, "PersistentVolumeClaimVolumeSource", ptr=True),
        11: F("rbd", MESSAGE, "RBDVolumeSource", ptr=True),
        12: F("flexVolume", MESSAGE, "FlexVolumeSource", ptr=True),
        13: F("cinder", MESSAGE, "CinderVolumeSource", ptr=True),
        14: F("cephfs", MESSAGE, "CephFSVolumeSource", ptr=True),
        15: F("flocker", MESSAGE, "FlockerVolumeSource", ptr=True),
        16: F("downwardAPI", MESSAGE, "DownwardAPIVolumeSource", ptr=True),
        17: F("fc", MESSAGE, "FCVolumeSource", ptr=True),
        18: F("azureFile", MESSAGE, "AzureFileVolumeSource", ptr=True),
        19: F("configMap", MESSAGE, "ConfigMapVolumeSource", ptr=True),
        20: F("vsphereVolume", MESSAGE, "VsphereVirtualDiskVolumeSource", ptr=True),
        21: F("quobyte", MESSAGE, "QuobyteVolumeSource", ptr=True),
        22: F("azureDisk", MESSAGE, "AzureDiskVolumeSource", ptr=True),
        23: F("photonPersistentDisk", MESSAGE, "PhotonPersistentDiskVolumeSource", ptr=True),
        24: F("portworxVolume", MESSAGE, "PortworxVolumeSource", ptr=True),
        25: F("scaleIO", MESSAGE, "ScaleIOVolumeSource", ptr=True),
        26: F("projected", MESSAGE, "ProjectedVolumeSource", ptr=True),
        27: F("storageos", MESSAGE, "StorageOSVolumeSource", ptr=True),
        28: F("csi", MESSAGE, "CSIVolumeSource", ptr=True),
        29: F("ephemeral", MESSAGE, "EphemeralVolumeSource", ptr=True),
        30: F("image", MESSAGE, "ImageVolumeSource", ptr=True),
    },
    # k8s.io/api/core/v1.HostPathVolumeSource
    "HostPathVolumeSource": {
        1: F("path", STRING, req=True),
        2: F("type", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.EmptyDirVolumeSource
    "EmptyDirVolumeSource": {
        1: F("medium", STRING),
        2: F("sizeLimit", MESSAGE, "Quantity", ptr=True),
        3: F("mode", INT32, ptr=True),
    },
    # k8s.io/api/core/v1.GCEPersistentDiskVolumeSource
    "GCEPersistentDiskVolumeSource": {
        1: F("pdName", STRING, req=True),
        2: F("fsType", STRING),
        3: F("partition", INT32),
        4: F("readOnly", BOOL),
    },
    # k8s.io/api/core/v1.AWSElasticBlockStoreVolumeSource
    "AWSElasticBlockStoreVolumeSource": {
        1: F("volumeID", STRING, req=True),
        2: F("fsType", STRING),
        3: F("partition", INT32),
        4: F("readOnly", BOOL),
    },
    # k8s.io/api/core/v1.GitRepoVolumeSource
    "GitRepoVolumeSource": {
        1: F("repository", STRING, req=True),
        2: F("revision", STRING),
        3: F("directory", STRING),
    },
    # k8s.io/api/core/v1.SecretVolumeSource
    "SecretVolumeSource": {
        1: F("secretName", STRING),
        2: F("items", MESSAGE, "KeyToPath", rep=True),
        3: F("defaultMode", INT32, ptr=True),
        4: F("optional", BOOL, ptr=True),
        5: F("defaultUser", INT64, ptr=True),
    },
    # k8s.io/api/core/v1.KeyToPath
    "KeyToPath": {
        1: F("key", STRING, req=True),
        2: F("path", STRING, req=True),
        3: F("mode", INT32, ptr=True),
        4: F("user", INT64, ptr=True),
    },
    # k8s.io/api/core/v1.NFSVolumeSource
    "NFSVolumeSource": {
        1: F("server", STRING, req=True),
        2: F("path", STRING, req=True),
        3: F("readOnly", BOOL),
    },
    # k8s.io/api/core/v1.ISCSIVolumeSource
    "ISCSIVolumeSource": {
        1: F("targetPortal", STRING, req=True),
        2: F("iqn", STRING, req=True),
        3: F("lun", INT32, req=True),
        4: F("iscsiInterface", STRING),
        5: F("fsType", STRING),
        6: F("readOnly", BOOL),
        7: F("portals", STRING, rep=True),
        8: F("chapAuthDiscovery", BOOL),
        10: F("secretRef", MESSAGE, "LocalObjectReference", ptr=True),
        11: F("chapAuthSession", BOOL),
        12: F("initiatorName", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.LocalObjectReference
    "LocalObjectReference": {
        1: F("name", STRING),
    },
    # k8s.io/api/core/v1.GlusterfsVolumeSource
    "GlusterfsVolumeSource": {
        1: F("endpoints", STRING, req=True),
        2: F("path", STRING, req=True),
        3: F("readOnly", BOOL),
    },
    # k8s.io/api/core/v1.PersistentVolumeClaimVolumeSource
    "PersistentVolumeClaimVolumeSource": {
        1: F("claimName", STRING, req=True),
        2: F("readOnly", BOOL),
    },
    # k8s.io/api/core/v1.RBDVolumeSource
    "RBDVolumeSource": {
        1: F("monitors", STRING, rep=True),
        2: F("image", STRING, req=True),
        3: F("fsType", STRING),
        4: F("pool", STRING),
        5: F("user", STRING),
        6: F("keyring", STRING),
        7: F("secretRef", MESSAGE, "LocalObjectReference", ptr=True),
        8: F("readOnly", BOOL),
    },
    # k8s.io/api/core/v1.FlexVolumeSource
    "FlexVolumeSource": {
        1: F("driver", STRING, req=True),
        2: F("fsType", STRING),
        3: F("secretRef", MESSAGE, "LocalObjectReference", ptr=True),
        4: F("readOnly", BOOL),
        5: F("options", MAP, value=STRING),
    },
    # k8s.io/api/core/v1.CinderVolumeSource
    "CinderVolumeSource": {
        1: F("volumeID", STRING, req=True),
        2: F("fsType", STRING),
        3: F("readOnly", BOOL),
        4: F("secretRef", MESSAGE, "LocalObjectReference", ptr=True),
    },
    # k8s.io/api/core/v1.CephFSVolumeSource
    "CephFSVolumeSource": {
        1: F("monitors", STRING, rep=True),
        2: F("path", STRING),
        3: F("user", STRING),
        4: F("secretFile", STRING),
        5: F("secretRef", MESSAGE, "LocalObjectReference", ptr=True),
        6: F("readOnly", BOOL),
    },
    # k8s.io/api/core/v1.FlockerVolumeSource
    "FlockerVolumeSource": {
        1: F("datasetName", STRING),
        2: F("datasetUUID", STRING),
    },
    # k8s.io/api/core/v1.DownwardAPIVolumeSource
    "DownwardAPIVolumeSource": {
        1: F("items", MESSAGE, "DownwardAPIVolumeFile", rep=True),
        2: F("defaultMode", INT32, ptr=True),
        3: F("defaultUser", INT64, ptr=True),
    },
    # k8s.io/api/core/v1.DownwardAPIVolumeFile
    "DownwardAPIVolumeFile": {
        1: F("path", STRING, req=True),
        2: F("fieldRef", MESSAGE, "ObjectFieldSelector", ptr=True),
        3: F("resourceFieldRef", MESSAGE, "ResourceFieldSelector", ptr=True),
        4: F("mode", INT32, ptr=True),
        5: F("user", INT64, ptr=True),
    },
    # k8s.io/api/core/v1.ObjectFieldSelector
    "ObjectFieldSelector": {
        1: F("apiVersion", STRING),
        2: F("fieldPath", STRING, req=True),
    },
    # k8s.io/api/core/v1.ResourceFieldSelector
    "ResourceFieldSelector": {
        1: F("containerName", STRING),
        2: F("resource", STRING, req=True),
        3: F("divisor", MESSAGE, "Quantity"),
    },
    # k8s.io/api/core/v1.FCVolumeSource
    "FCVolumeSource": {
        1: F("targetWWNs", STRING, rep=True),
        2: F("lun", INT32, ptr=True),
        3: F("fsType", STRING),
        4: F("readOnly", BOOL),
        5: F("wwids", STRING, rep=True),
    },
    # k8s.io/api/core/v1.AzureFileVolumeSource
    "AzureFileVolumeSource": {
        1: F("secretName", STRING, req=True),
        2: F("shareName", STRING, req=True),
        3: F("readOnly", BOOL),
    },
    # k8s.io/api/core/v1.ConfigMapVolumeSource
    "ConfigMapVolumeSource": {
        1: F("", MESSAGE, "LocalObjectReference", inline=True),
        2: F("items", MESSAGE, "KeyToPath", rep=True),
        3: F("defaultMode", INT32, ptr=True),
        4: F("optional", BOOL, ptr=True),
        5: F("defaultUser", INT64, ptr=True),
    },
    # k8s.io/api/core/v1.VsphereVirtualDiskVolumeSource
    "VsphereVirtualDiskVolumeSource": {
        1: F("volumePath", STRING, req=True),
        2: F("fsType", STRING),
        3: F("storagePolicyName", STRING),
        4: F("storagePolicyID", STRING),
    },
    # k8s.io/api/core/v1.QuobyteVolumeSource
    "QuobyteVolumeSource": {
        1: F("registry", STRING, req=True),
        2: F("volume", STRING, req=True),
        3: F("readOnly", BOOL),
        4: F("user", STRING),
        5: F("group", STRING),
        6: F("tenant", STRING),
    },
    # k8s.io/api/core/v1.AzureDiskVolumeSource
    "AzureDiskVolumeSource": {
        1: F("diskName", STRING, req=True),
        2: F("diskURI", STRING, req=True),
        3: F("cachingMode", STRING, ptr=True),
        4: F("fsType", STRING, ptr=True),
        5: F("readOnly", BOOL, ptr=True),
        6: F("kind", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.PhotonPersistentDiskVolumeSource
    "PhotonPersistentDiskVolumeSource": {
        1: F("pdID", STRING, req=True),
        2: F("fsType", STRING),
    },
    # k8s.io/api/core/v1.ProjectedVolumeSource
    "ProjectedVolumeSource": {
        1: F("sources", MESSAGE, "VolumeProjection", rep=True),
        2: F("defaultMode", INT32, ptr=True),
        3: F("defaultUser", INT64, ptr=True),
    },
    # k8s.io/api/core/v1.VolumeProjection
    "VolumeProjection": {
        1: F("secret", MESSAGE, "SecretProjection", ptr=True),
        2: F("downwardAPI", MESSAGE, "DownwardAPIProjection", ptr=True),
        3: F("configMap", MESSAGE, "ConfigMapProjection", ptr=True),
        4: F("serviceAccountToken", MESSAGE, "ServiceAccountTokenProjection", ptr=True),
        5: F("clusterTrustBundle", MESSAGE, "ClusterTrustBundleProjection", ptr=True),
        6: F("podCertificate", MESSAGE, "PodCertificateProjection", ptr=True),
    },
    # k8s.io/api/core/v1.SecretProjection
    "SecretProjection": {
        1: F("", MESSAGE, "LocalObjectReference", inline=True),
        2: F("items", MESSAGE, "KeyToPath", rep=True),
        4: F("optional", BOOL, ptr=True),
    },
    # k8s.io/api/core/v1.DownwardAPIProjection
    "DownwardAPIProjection": {
        1: F("items", MESSAGE, "DownwardAPIVolumeFile", rep=True),
    },
    # k8s.io/api/core/v1.ConfigMapProjection
    "ConfigMapProjection": {
        1: F("", MESSAGE, "LocalObjectReference", inline=True),
        2: F("items", MESSAGE, "KeyToPath", rep=True),
        4: F("optional", BOOL, ptr=True),
    },
    # k8s.io/api/core/v1.ServiceAccountTokenProjection
    "ServiceAccountTokenProjection": {
        1: F("audience", STRING),
        2: F("expirationSeconds", INT64, ptr=True),
        3: F("path", STRING, req=True),
        4: F("user", INT64, ptr=True),
    },
    # k8s.io/api/core/v1.ClusterTrustBundleProjection
    "ClusterTrustBundleProjection": {
        1: F("name", STRING, ptr=True),
        2: F("signerName", STRING, ptr=True),
        3: F("labelSelector", MESSAGE, "LabelSelector", ptr=True),
        4: F("path", STRING, req=True),
        5: F("optional", BOOL, ptr=True),
        6: F("user", INT64, ptr=True),
    },
    # k8s.io/apimachinery/pkg/apis/meta/v1.LabelSelector
    "LabelSelector": {
        1: F("matchLabels", MAP, value=STRING),
        2: F("matchExpressions", MESSAGE, "LabelSelectorRequirement", rep=True),
    },
    # k8s.io/apimachinery/pkg/apis/meta/v1.LabelSelectorRequirement
    "LabelSelectorRequirement": {
        1: F("key", STRING, req=True),
        2: F("operator", STRING, req=True),
        3: F("values", STRING, rep=True),
    },
    # k8s.io/api/core/v1.PodCertificateProjection
    "PodCertificateProjection": {
        1: F("signerName", STRING),
        2: F("keyType", STRING),
        3: F("maxExpirationSeconds", INT32, ptr=True),
        4: F("credentialBundlePath", STRING),
        5: F("keyPath", STRING),
        6: F("certificateChainPath", STRING),
        7: F("userAnnotations", MAP, value=STRING),
        8: F("user", INT64, ptr=True),
    },
    # k8s.io/api/core/v1.PortworxVolumeSource
    "PortworxVolumeSource": {
        1: F("volumeID", STRING, req=True),
        2: F("fsType", STRING),
        3: F("readOnly", BOOL),
    },
    # k8s.io/api/core/v1.ScaleIOVolumeSource
    "ScaleIOVolumeSource": {
        1: F("gateway", STRING, req=True),
        2: F("system", STRING, req=True),
        3: F("secretRef", MESSAGE, "LocalObjectReference", ptr=True),
        4: F("sslEnabled", BOOL),
        5: F("protectionDomain", STRING),
        6: F("storagePool", STRING),
        7: F("storageMode", STRING),
        8: F("volumeName", STRING),
        9: F("fsType", STRING),
        10: F("readOnly", BOOL),
    },
    # k8s.io/api/core/v1.StorageOSVolumeSource
    "StorageOSVolumeSource": {
        1: F("volumeName", STRING),
        2: F("volumeNamespace", STRING),
        3: F("fsType", STRING),
        4: F("readOnly", BOOL),
        5: F("secretRef", MESSAGE, "LocalObjectReference", ptr=True),
    },
    # k8s.io/api/core/v1.CSIVolumeSource
    "CSIVolumeSource": {
        1: F("driver", STRING, req=True),
        2: F("readOnly", BOOL, ptr=True),
        3: F("fsType", STRING, ptr=True),
        4: F("volumeAttributes", MAP, value=STRING),
        5: F("nodePublishSecretRef", MESSAGE, "LocalObjectReference", ptr=True),
    },
    # k8s.io/api/core/v1.EphemeralVolumeSource
    "EphemeralVolumeSource": {
        1: F("volumeClaimTemplate", MESSAGE, "PersistentVolumeClaimTemplate", ptr=True),
    },
    # k8s.io/api/core/v1.PersistentVolumeClaimTemplate
    "PersistentVolumeClaimTemplate": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("spec", MESSAGE, "PersistentVolumeClaimSpec"),
    },
    # k8s.io/api/core/v1.PersistentVolumeClaimSpec
    "PersistentVolumeClaimSpec": {
        1: F("accessModes", STRING, rep=True),
        2: F("resources", MESSAGE, "VolumeResourceRequirements"),
        3: F("volumeName", STRING),
        4: F("selector", MESSAGE, "LabelSelector", ptr=True),
        5: F("storageClassName", STRING, ptr=True),
        6: F("volumeMode", STRING, ptr=True),
        7: F("dataSource", MESSAGE, "TypedLocalObjectReference", ptr=True),
        8: F("dataSourceRef", MESSAGE, "TypedObjectReference", ptr=True),
        9: F("volumeAttributesClassName", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.VolumeResourceRequirements
    "VolumeResourceRequirements": {
        1: F("limits", MAP, "Quantity", value=MESSAGE),
        2: F("requests", MAP, "Quantity", value=MESSAGE),
    },
    # k8s.io/api/core/v1.TypedLocalObjectReference
    "TypedLocalObjectReference": {
        1: F("apiGroup", STRING, ptr=True),
        2: F("kind", STRING, req=True),
        3: F("name", STRING, req=True),
    },
    # k8s.io/api/core/v1.TypedObjectReference
    "TypedObjectReference": {
        1: F("apiGroup", STRING, ptr=True),
        2: F("kind", STRING, req=True),
        3: F("name", STRING, req=True),
        4: F("namespace", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.ImageVolumeSource
    "ImageVolumeSource": {
        1: F("reference", STRING),
        2: F("pullPolicy", STRING),
    },
    # k8s.io/api/core/v1.Container
    "Container": {
        1: F("name", STRING, req=True),
        2: F("image", STRING),
        3: F("command", STRING, rep=True),
        4: F("args", STRING, rep=True),
        5: F("workingDir", STRING),
        6: F("ports", MESSAGE, "ContainerPort", rep=True),
        7: F("env", MESSAGE, "EnvVar", rep=True),
        8: F("resources", MESSAGE, "ResourceRequirements"),
        9: F("volumeMounts", MESSAGE, "VolumeMount", rep=True),
        10: F("livenessProbe", MESSAGE, "Probe", ptr=True),
        11: F("readinessProbe", MESSAGE, "Probe", ptr=True),
        12: F("lifecycle", MESSAGE, "Lifecycle", ptr=True),
        13: F("terminationMessagePath", STRING),
        14: F("imagePullPolicy", STRING),
        15: F("securityContext", MESSAGE, "SecurityContext", ptr=True),
        16: F("stdin", BOOL),
        17: F("stdinOnce", BOOL),
        18: F("tty", BOOL),
        19: F("envFrom", MESSAGE, "EnvFromSource", rep=True),
        20: F("terminationMessagePolicy", STRING),
        21: F("volumeDevices", MESSAGE, "VolumeDevice", rep=True),
        22: F("startupProbe", MESSAGE, "Probe", ptr=True),
        23: F("resizePolicy", MESSAGE, "ContainerResizePolicy", rep=True),
        24: F("restartPolicy", STRING, ptr=True),
        25: F("restartPolicyRules", MESSAGE, "ContainerRestartRule", rep=True),
    },
    # k8s.io/api/core/v1.ContainerPort
    "ContainerPort": {
        1: F("name", STRING),
        2: F("hostPort", INT32),
        3: F("containerPort", INT32, req=True),
        4: F("protocol", STRING),
        5: F("hostIP", STRING),
    },
    # k8s.io/api/core/v1.EnvFromSource
    "EnvFromSource": {
        1: F("prefix", STRING),
        2: F("configMapRef", MESSAGE, "ConfigMapEnvSource", ptr=True),
        3: F("secretRef", MESSAGE, "SecretEnvSource", ptr=True),
    },
    # k8s.io/api/core/v1.ConfigMapEnvSource
    "ConfigMapEnvSource": {
        1: F("", MESSAGE, "LocalObjectReference", inline=True),
        2: F("optional", BOOL, ptr=True),
    },
    # k8s.io/api/core/v1.SecretEnvSource
    "SecretEnvSource": {
        1: F("", MESSAGE, "LocalObjectReference", inline=True),
        2: F("optional", BOOL, ptr=True),
    },
    # k8s.io/api/core/v1.EnvVar
    "EnvVar": {
        1: F("name", STRING, req=True),
        2: F("value", STRING),
        3: F("valueFrom", MESSAGE, "EnvVarSource", ptr=True),
    },
    # k8s.io/api/core/v1.EnvVarSource
    "EnvVarSource": {
        1: F("fieldRef", MESSAGE, "ObjectFieldSelector", ptr=True),
        2: F("resourceFieldRef", MESSAGE, "ResourceFieldSelector", ptr=True),
        3: F("configMapKeyRef", MESSAGE, "ConfigMapKeySelector", ptr=True),
        4: F("secretKeyRef", MESSAGE, "SecretKeySelector", ptr=True),
        5: F("fileKeyRef", MESSAGE, "FileKeySelector", ptr=True),
    },
    # k8s.io/api/core/v1.ConfigMapKeySelector
    "ConfigMapKeySelector": {
        1: F("", MESSAGE, "LocalObjectReference", inline=True),
        2: F("key", STRING, req=True),
        3: F("optional", BOOL, ptr=True),
    },
    # k8s.io/api/core/v1.SecretKeySelector
    "SecretKeySelector": {
        1: F("", MESSAGE, "LocalObjectReference", inline=True),
        2: F("key", STRING, req=True),
        3: F("optional", BOOL, ptr=True),
    },
    # k8s.io/api/core/v1.FileKeySelector
    "FileKeySelector": {
        1: F("volumeName", STRING, req=True),
        2: F("path", STRING, req=True),
        3: F("key", STRING, req=True),
        4: F("optional", BOOL, ptr=True),
    },
    # k8s.io/api/core/v1.ResourceRequirements
    "ResourceRequirements": {
        1: F("limits", MAP, "Quantity", value=MESSAGE),
        2: F("requests", MAP, "Quantity", value=MESSAGE),
        3: F("claims", MESSAGE, "ResourceClaim", rep=True),
    },
    # k8s.io/api/core/v1.ResourceClaim
    "ResourceClaim": {
        1: F("name", STRING, req=True),
        2: F("request", STRING),
    },
    # k8s.io/api/core/v1.ContainerResizePolicy
    "ContainerResizePolicy": {
        1: F("resourceName", STRING, req=True),
        2: F("restartPolicy", STRING, req=True),
    },
    # k8s.io/api/core/v1.ContainerRestartRule
    "ContainerRestartRule": {
        1: F("action", STRING),
        2: F("exitCodes", MESSAGE, "ContainerRestartRuleOnExitCodes", ptr=True),
    },
    # k8s.io/api/core/v1.ContainerRestartRuleOnExitCodes
    "ContainerRestartRuleOnExitCodes": {
        1: F("operator", STRING),
        2: F("values", INT32, rep=True),
    },
    # k8s.io/api/core/v1.VolumeMount
    "VolumeMount": {
        1: F("name", STRING, req=True),
        2: F("readOnly", BOOL),
        3: F("mountPath", STRING, req=True),
        4: F("subPath", STRING),
        5: F("mountPropagation", STRING, ptr=True),
        6: F("subPathExpr", STRING),
        7: F("recursiveReadOnly", STRING, ptr=True),
        8: F("bindMountOptions", STRING, rep=True),
    },
    # k8s.io/api/core/v1.VolumeDevice
    "VolumeDevice": {
        1: F("name", STRING, req=True),
        2: F("devicePath", STRING, req=True),
    },
    # k8s.io/api/core/v1.Probe
    "Probe": {
        1: F("", MESSAGE, "ProbeHandler", inline=True),
        2: F("initialDelaySeconds", INT32),
        3: F("timeoutSeconds", INT32),
        4: F("periodSeconds", INT32),
        5: F("successThreshold", INT32),
        6: F("failureThreshold", INT32),
        7: F("terminationGracePeriodSeconds", INT64, ptr=True),
    },
    # k8s.io/api/core/v1.ProbeHandler
    "ProbeHandler": {
        1: F("exec", MESSAGE, "ExecAction", ptr=True),
        2: F("httpGet", MESSAGE, "HTTPGetAction", ptr=True),
        3: F("tcpSocket", MESSAGE, "TCPSocketAction", ptr=True),
        4: F("grpc", MESSAGE, "GRPCAction", ptr=True),
    },
    # k8s.io/api/core/v1.ExecAction
    "ExecAction": {
        1: F("command", STRING, rep=True),
    },
    # k8s.io/api/core/v1.HTTPGetAction
    "HTTPGetAction": {
        1: F("path", STRING),
        2: F("port", MESSAGE, "IntOrString"),
        3: F("host", STRING),
        4: F("scheme", STRING),
        5: F("httpHeaders", MESSAGE, "HTTPHeader", rep=True),
        6: F("protocol", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.HTTPHeader
    "HTTPHeader": {
        1: F("name", STRING, req=True),
        2: F("value", STRING, req=True),
    },
    # k8s.io/api/core/v1.TCPSocketAction
    "TCPSocketAction": {
        1: F("port", MESSAGE, "IntOrString"),
        2: F("host", STRING),
    },
    # k8s.io/api/core/v1.GRPCAction
    "GRPCAction": {
        1: F("port", INT32, req=True),
        2: F("service", STRING, ptr=True),
        3: F("mode", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.Lifecycle
    "Lifecycle": {
        1: F("postStart", MESSAGE, "LifecycleHandler", ptr=True),
        2: F("preStop", MESSAGE, "LifecycleHandler", ptr=True),
        3: F("stopSignal", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.LifecycleHandler
    "LifecycleHandler": {
        1: F("exec", MESSAGE, "ExecAction", ptr=True),
        2: F("httpGet", MESSAGE, "HTTPGetAction", ptr=True),
        3: F("tcpSocket", MESSAGE, "TCPSocketAction", ptr=True),
        4: F("sleep", MESSAGE, "SleepAction", ptr=True),
    },
    # k8s.io/api/core/v1.SleepAction
    "SleepAction": {
        1: F("seconds", INT64, req=True),
    },
    # k8s.io/api/core/v1.SecurityContext
    "SecurityContext": {
        1: F("capabilities", MESSAGE, "Capabilities", ptr=True),
        2: F("privileged", BOOL, ptr=True),
        3: F("seLinuxOptions", MESSAGE, "SELinuxOptions", ptr=True),
        4: F("runAsUser", INT64, ptr=True),
        5: F("runAsNonRoot", BOOL, ptr=True),
        6: F("readOnlyRootFilesystem", BOOL, ptr=True),
        7: F("allowPrivilegeEscalation", BOOL, ptr=True),
        8: F("runAsGroup", INT64, ptr=True),
        9: F("procMount", STRING, ptr=True),
        10: F("windowsOptions", MESSAGE, "WindowsSecurityContextOptions", ptr=True),
        11: F("seccompProfile", MESSAGE, "SeccompProfile", ptr=True),
        12: F("appArmorProfile", MESSAGE, "AppArmorProfile", ptr=True),
    },
    # k8s.io/api/core/v1.Capabilities
    "Capabilities": {
        1: F("add", STRING, rep=True),
        2: F("drop", STRING, rep=True),
    },
    # k8s.io/api/core/v1.SELinuxOptions
    "SELinuxOptions": {
        1: F("user", STRING),
        2: F("role", STRING),
        3: F("type", STRING),
        4: F("level", STRING),
    },
    # k8s.io/api/core/v1.WindowsSecurityContextOptions
    "WindowsSecurityContextOptions": {
        1: F("gmsaCredentialSpecName", STRING, ptr=True),
        2: F("gmsaCredentialSpec", STRING, ptr=True),
        3: F("runAsUserName", STRING, ptr=True),
        4: F("hostProcess", BOOL, ptr=True),
    },
    # k8s.io/api/core/v1.SeccompProfile
    "SeccompProfile": {
        1: F("type", STRING, req=True),
        2: F("localhostProfile", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.AppArmorProfile
    "AppArmorProfile": {
        1: F("type", STRING, req=True),
        2: F("localhostProfile", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.EphemeralContainer
    "EphemeralContainer": {
        1: F("", MESSAGE, "EphemeralContainerCommon", inline=True),
        2: F("targetContainerName", STRING),
    },
    # k8s.io/api/core/v1.EphemeralContainerCommon
    "EphemeralContainerCommon": {
        1: F("name", STRING, req=True),
        2: F("image", STRING),
        3: F("command", STRING, rep=True),
        4: F("args", STRING, rep=True),
        5: F("workingDir", STRING),
        6: F("ports", MESSAGE, "ContainerPort", rep=True),
        7: F("env", MESSAGE, "EnvVar", rep=True),
        8: F("resources", MESSAGE, "ResourceRequirements"),
        9: F("volumeMounts", MESSAGE, "VolumeMount", rep=True),
        10: F("livenessProbe", MESSAGE, "Probe", ptr=True),
        11: F("readinessProbe", MESSAGE, "Probe", ptr=True),
        12: F("lifecycle", MESSAGE, "Lifecycle", ptr=True),
        13: F("terminationMessagePath", STRING),
        14: F("imagePullPolicy", STRING),
        15: F("securityContext", MESSAGE, "SecurityContext", ptr=True),
        16: F("stdin", BOOL),
        17: F("stdinOnce", BOOL),
        18: F("tty", BOOL),
        19: F("envFrom", MESSAGE, "EnvFromSource", rep=True),
        20: F("terminationMessagePolicy", STRING),
        21: F("volumeDevices", MESSAGE, "VolumeDevice", rep=True),
        22: F("startupProbe", MESSAGE, "Probe", ptr=True),
        23: F("resizePolicy", MESSAGE, "ContainerResizePolicy", rep=True),
        24: F("restartPolicy", STRING, ptr=True),
        25: F("restartPolicyRules", MESSAGE, "ContainerRestartRule", rep=True),
    },
    # k8s.io/api/core/v1.PodSecurityContext
    "PodSecurityContext": {
        1: F("seLinuxOptions", MESSAGE, "SELinuxOptions", ptr=True),
        2: F("runAsUser", INT64, ptr=True),
        3: F("runAsNonRoot", BOOL, ptr=True),
        4: F("supplementalGroups", INT64, rep=True),
        5: F("fsGroup", INT64, ptr=True),
        6: F("runAsGroup", INT64, ptr=True),
        7: F("sysctls", MESSAGE, "Sysctl", rep=True),
        8: F("windowsOptions", MESSAGE, "WindowsSecurityContextOptions", ptr=True),
        9: F("fsGroupChangePolicy", STRING, ptr=True),
        10: F("seccompProfile", MESSAGE, "SeccompProfile", ptr=True),
        11: F("appArmorProfile", MESSAGE, "AppArmorProfile", ptr=True),
        12: F("supplementalGroupsPolicy", STRING, ptr=True),
        13: F("seLinuxChangePolicy", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.Sysctl
    "Sysctl": {
        1: F("name", STRING, req=True),
        2: F("value", STRING, req=True),
    },
    # k8s.io/api/core/v1.Affinity
    "Affinity": {
        1: F("nodeAffinity", MESSAGE, "NodeAffinity", ptr=True),
        2: F("podAffinity", MESSAGE, "PodAffinity", ptr=True),
        3: F("podAntiAffinity", MESSAGE, "PodAntiAffinity", ptr=True),
    },
    # k8s.io/api/core/v1.NodeAffinity
    "NodeAffinity": {
        1: F("requiredDuringSchedulingIgnoredDuringExecution", MESSAGE, "NodeSelector", ptr=True),
        2: F(
            "preferredDuringSchedulingIgnoredDuringExecution",
            MESSAGE,
            "PreferredSchedulingTerm",
            rep=True,
        ),
    },
    # k8s.io/api/core/v1.NodeSelector
    "NodeSelector": {
        1: F("nodeSelectorTerms", MESSAGE, "NodeSelectorTerm", rep=True),
    },
    # k8s.io/api/core/v1.NodeSelectorTerm
    "NodeSelectorTerm": {
        1: F("matchExpressions", MESSAGE, "NodeSelectorRequirement", rep=True),
        2: F("matchFields", MESSAGE, "NodeSelectorRequirement", rep=True),
    },
    # k8s.io/api/core/v1.NodeSelectorRequirement
    "NodeSelectorRequirement": {
        1: F("key", STRING, req=True),
        2: F("operator", STRING, req=True),
        3: F("values", STRING, rep=True),
    },
    # k8s.io/api/core/v1.PreferredSchedulingTerm
    "PreferredSchedulingTerm": {
        1: F("weight", INT32, req=True),
        2: F("preference", MESSAGE, "NodeSelectorTerm"),
    },
    # k8s.io/api/core/v1.PodAffinity
    "PodAffinity": {
        1: F(
            "requiredDuringSchedulingIgnoredDuringExecution", MESSAGE, "PodAffinityTerm", rep=True
        ),
        2: F(
            "preferredDuringSchedulingIgnoredDuringExecution",
            MESSAGE,
            "WeightedPodAffinityTerm",
            rep=True,
        ),
    },
    # k8s.io/api/core/v1.PodAffinityTerm
    "PodAffinityTerm": {
        1: F("labelSelector", MESSAGE, "LabelSelector", ptr=True),
        2: F("namespaces", STRING, rep=True),
        3: F("topologyKey", STRING, req=True),
        4: F("namespaceSelector", MESSAGE, "LabelSelector", ptr=True),
        5: F("matchLabelKeys", STRING, rep=True),
        6: F("mismatchLabelKeys", STRING, rep=True),
    },
    # k8s.io/api/core/v1.WeightedPodAffinityTerm
    "WeightedPodAffinityTerm": {
        1: F("weight", INT32, req=True),
        2: F("podAffinityTerm", MESSAGE, "PodAffinityTerm"),
    },
    # k8s.io/api/core/v1.PodAntiAffinity
    "PodAntiAffinity": {
        1: F(
            "requiredDuringSchedulingIgnoredDuringExecution", MESSAGE, "PodAffinityTerm", rep=True
        ),
        2: F(
            "preferredDuringSchedulingIgnoredDuringExecution",
            MESSAGE,
            "WeightedPodAffinityTerm",
            rep=True,
        ),
    },
    # k8s.io/api/core/v1.Toleration
    "Toleration": {
        1: F("key", STRING),
        2: F("operator", STRING),
        3: F("value", STRING),
        4: F("effect", STRING),
        5: F("tolerationSeconds", INT64, ptr=True),
    },
    # k8s.io/api/core/v1.HostAlias
    "HostAlias": {
        1: F("ip", STRING, req=True),
        2: F("hostnames", STRING, rep=True),
    },
    # k8s.io/api/core/v1.PodDNSConfig
    "PodDNSConfig": {
        1: F("nameservers", STRING, rep=True),
        2: F("searches", STRING, rep=True),
        3: F("options", MESSAGE, "PodDNSConfigOption", rep=True),
    },
    # k8s.io/api/core/v1.PodDNSConfigOption
    "PodDNSConfigOption": {
        1: F("name", STRING),
        2: F("value", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.PodReadinessGate
    "PodReadinessGate": {
        1: F("conditionType", STRING, req=True),
    },
    # k8s.io/api/core/v1.TopologySpreadConstraint
    "TopologySpreadConstraint": {
        1: F("maxSkew", INT32, req=True),
        2: F("topologyKey", STRING, req=True),
        3: F("whenUnsatisfiable", STRING, req=True),
        4: F("labelSelector", MESSAGE, "LabelSelector", ptr=True),
        5: F("minDomains", INT32, ptr=True),
        6: F("nodeAffinityPolicy", STRING, ptr=True),
        7: F("nodeTaintsPolicy", STRING, ptr=True),
        8: F("matchLabelKeys", STRING, rep=True),
    },
    # k8s.io/api/core/v1.PodOS
    "PodOS": {
        1: F("name", STRING, req=True),
    },
    # k8s.io/api/core/v1.PodSchedulingGate
    "PodSchedulingGate": {
        1: F("name", STRING, req=True),
    },
    # k8s.io/api/core/v1.PodResourceClaim
    "PodResourceClaim": {
        1: F("name", STRING, req=True),
        3: F("resourceClaimName", STRING, ptr=True),
        4: F("resourceClaimTemplateName", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.PodSchedulingGroup
    "PodSchedulingGroup": {
        1: F("podGroupName", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.EvictionResponder
    "EvictionResponder": {
        1: F("name", STRING, req=True),
        2: F("priority", INT32, ptr=True),
    },
    # k8s.io/api/core/v1.PodStatus
    "PodStatus": {
        1: F("phase", STRING),
        2: F("conditions", MESSAGE, "PodCondition", rep=True),
        3: F("message", STRING),
        4: F("reason", STRING),
        5: F("hostIP", STRING),
        6: F("podIP", STRING),
        7: F("startTime", MESSAGE, "Time", ptr=True),
        8: F("containerStatuses", MESSAGE, "ContainerStatus", rep=True),
        9: F("qosClass", STRING),
        10: F("initContainerStatuses", MESSAGE, "ContainerStatus", rep=True),
        11: F("nominatedNodeName", STRING),
        12: F("podIPs", MESSAGE, "PodIP", rep=True),
        13: F("ephemeralContainerStatuses", MESSAGE, "ContainerStatus", rep=True),
        14: F("resize", STRING),
        15: F("resourceClaimStatuses", MESSAGE, "PodResourceClaimStatus", rep=True),
        16: F("hostIPs", MESSAGE, "HostIP", rep=True),
        17: F("observedGeneration", INT64),
        18: F("extendedResourceClaimStatus", MESSAGE, "PodExtendedResourceClaimStatus", ptr=True),
        19: F("allocatedResources", MAP, "Quantity", value=MESSAGE),
        20: F("resources", MESSAGE, "ResourceRequirements", ptr=True),
        21: F(
            "nodeAllocatableResourceClaimStatuses",
            MESSAGE,
            "NodeAllocatableResourceClaimStatus",
            rep=True,
        ),
        22: F("volumeHealth", MESSAGE, "PodVolumeHealth", rep=True),
    },
    # k8s.io/api/core/v1.PodCondition
    "PodCondition": {
        1: F("type", STRING, req=True),
        2: F("status", STRING, req=True),
        3: F("lastProbeTime", MESSAGE, "Time"),
        4: F("lastTransitionTime", MESSAGE, "Time"),
        5: F("reason", STRING),
        6: F("message", STRING),
        7: F("observedGeneration", INT64),
    },
    # k8s.io/api/core/v1.HostIP
    "HostIP": {
        1: F("ip", STRING, req=True),
    },
    # k8s.io/api/core/v1.PodIP
    "PodIP": {
        1: F("ip", STRING, req=True),
    },
    # k8s.io/api/core/v1.ContainerStatus
    "ContainerStatus": {
        1: F("name", STRING, req=True),
        2: F("state", MESSAGE, "ContainerState"),
        3: F("lastState", MESSAGE, "ContainerState"),
        4: F("ready", BOOL, req=True),
        5: F("restartCount", INT32, req=True),
        6: F("image", STRING, req=True),
        7: F("imageID", STRING, req=True),
        8: F("containerID", STRING),
        9: F("started", BOOL, ptr=True),
        10: F("allocatedResources", MAP, "Quantity", value=MESSAGE),
        11: F("resources", MESSAGE, "ResourceRequirements", ptr=True),
        12: F("volumeMounts", MESSAGE, "VolumeMountStatus", rep=True),
        13: F("user", MESSAGE, "ContainerUser", ptr=True),
        14: F("allocatedResourcesStatus", MESSAGE, "ResourceStatus", rep=True),
        15: F("stopSignal", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.ContainerState
    "ContainerState": {
        1: F("waiting", MESSAGE, "ContainerStateWaiting", ptr=True),
        2: F("running", MESSAGE, "ContainerStateRunning", ptr=True),
        3: F("terminated", MESSAGE, "ContainerStateTerminated", ptr=True),
    },
    # k8s.io/api/core/v1.ContainerStateWaiting
    "ContainerStateWaiting": {
        1: F("reason", STRING),
        2: F("message", STRING),
    },
    # k8s.io/api/core/v1.ContainerStateRunning
    "ContainerStateRunning": {
        1: F("startedAt", MESSAGE, "Time"),
    },
    # k8s.io/api/core/v1.ContainerStateTerminated
    "ContainerStateTerminated": {
        1: F("exitCode", INT32, req=True),
        2: F("signal", INT32),
        3: F("reason", STRING),
        4: F("message", STRING),
        5: F("startedAt", MESSAGE, "Time"),
        6: F("finishedAt", MESSAGE, "Time"),
        7: F("containerID", STRING),
    },
    # k8s.io/api/core/v1.VolumeMountStatus
    "VolumeMountStatus": {
        1: F("name", STRING, req=True),
        2: F("mountPath", STRING, req=True),
        3: F("readOnly", BOOL),
        4: F("recursiveReadOnly", STRING, ptr=True),
        5: F("volumeStatus", MESSAGE, "VolumeStatus", ptr=True),
    },
    # k8s.io/api/core/v1.VolumeStatus
    "VolumeStatus": {
        1: F("image", MESSAGE, "ImageVolumeStatus", ptr=True),
    },
    # k8s.io/api/core/v1.ImageVolumeStatus
    "ImageVolumeStatus": {
        1: F("imageRef", STRING),
    },
    # k8s.io/api/core/v1.ContainerUser
    "ContainerUser": {
        1: F("linux", MESSAGE, "LinuxContainerUser", ptr=True),
    },
    # k8s.io/api/core/v1.LinuxContainerUser
    "LinuxContainerUser": {
        1: F("uid", INT64, req=True),
        2: F("gid", INT64, req=True),
        3: F("supplementalGroups", INT64, rep=True),
    },
    # k8s.io/api/core/v1.ResourceStatus
    "ResourceStatus": {
        1: F("name", STRING, req=True),
        2: F("resources", MESSAGE, "ResourceHealth", rep=True),
    },
    # k8s.io/api/core/v1.ResourceHealth
    "ResourceHealth": {
        1: F("resourceID", STRING, req=True),
        2: F("health", STRING),
        6: F("message", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.PodResourceClaimStatus
    "PodResourceClaimStatus": {
        1: F("name", STRING, req=True),
        2: F("resourceClaimName", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.PodExtendedResourceClaimStatus
    "PodExtendedResourceClaimStatus": {
        1: F("requestMappings", MESSAGE, "ContainerExtendedResourceRequest", rep=True),
        2: F("resourceClaimName", STRING, req=True),
    },
    # k8s.io/api/core/v1.ContainerExtendedResourceRequest
    "ContainerExtendedResourceRequest": {
        1: F("containerName", STRING, req=True),
        2: F("resourceName", STRING, req=True),
        3: F("requestName", STRING, req=True),
    },
    # k8s.io/api/core/v1.NodeAllocatableResourceClaimStatus
    "NodeAllocatableResourceClaimStatus": {
        1: F("resourceClaimName", STRING, req=True),
        2: F("containers", STRING, rep=True),
        4: F("mapping", MESSAGE, "NodeAllocatableMappedResources", rep=True),
        5: F("overhead", MESSAGE, "NodeAllocatableOverheadResources", rep=True),
    },
    # k8s.io/api/core/v1.NodeAllocatableMappedResources
    "NodeAllocatableMappedResources": {
        1: F("name", STRING, req=True),
        2: F("quantity", MESSAGE, "Quantity", ptr=True),
    },
    # k8s.io/api/core/v1.NodeAllocatableOverheadResources
    "NodeAllocatableOverheadResources": {
        1: F("name", STRING, req=True),
        2: F("perPod", MESSAGE, "Quantity", ptr=True),
        3: F("perContainer", MESSAGE, "Quantity", ptr=True),
    },
    # k8s.io/api/core/v1.PodVolumeHealth
    "PodVolumeHealth": {
        1: F("name", STRING, req=True),
        2: F("healthConditions", MESSAGE, "VolumeHealthCondition", rep=True),
        3: F("lastTransitionTime", MESSAGE, "Time"),
    },
    # k8s.io/api/core/v1.VolumeHealthCondition
    "VolumeHealthCondition": {
        1: F("status", STRING, req=True),
        2: F("reason", STRING, req=True),
        3: F("message", STRING),
    },
    # k8s.io/api/core/v1.Event
    "Event": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("involvedObject", MESSAGE, "ObjectReference"),
        3: F("reason", STRING),
        4: F("message", STRING),
        5: F("source", MESSAGE, "EventSource"),
        6: F("firstTimestamp", MESSAGE, "Time"),
        7: F("lastTimestamp", MESSAGE, "Time"),
        8: F("count", INT32),
        9: F("type", STRING),
        10: F("eventTime", MESSAGE, "MicroTime"),
        11: F("series", MESSAGE, "EventSeries", ptr=True),
        12: F("action", STRING),
        13: F("related", MESSAGE, "ObjectReference", ptr=True),
        14: F("reportingComponent", STRING, req=True),
        15: F("reportingInstance", STRING, req=True),
    },
    # k8s.io/api/core/v1.ObjectReference
    "ObjectReference": {
        1: F("kind", STRING),
        2: F("namespace", STRING),
        3: F("name", STRING),
        4: F("uid", STRING),
        5: F("apiVersion", STRING),
        6: F("resourceVersion", STRING),
        7: F("fieldPath", STRING),
    },
    # k8s.io/api/core/v1.EventSource
    "EventSource": {
        1: F("component", STRING),
        2: F("host", STRING),
    },
    # k8s.io/api/core/v1.EventSeries
    "EventSeries": {
        1: F("count", INT32),
        2: F("lastObservedTime", MESSAGE, "MicroTime"),
    },
    # k8s.io/api/core/v1.ConfigMap
    "ConfigMap": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("data", MAP, value=STRING),
        3: F("binaryData", MAP, value=BYTES),
        4: F("immutable", BOOL, ptr=True),
    },
    # k8s.io/api/core/v1.Secret
    "Secret": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("data", MAP, value=BYTES),
        3: F("type", STRING),
        4: F("stringData", MAP, value=STRING),
        5: F("immutable", BOOL, ptr=True),
    },
    # k8s.io/api/core/v1.Service
    "Service": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("spec", MESSAGE, "ServiceSpec"),
        3: F("status", MESSAGE, "ServiceStatus"),
    },
    # k8s.io/api/core/v1.ServiceSpec
    "ServiceSpec": {
        1: F("ports", MESSAGE, "ServicePort", rep=True),
        2: F("selector", MAP, value=STRING),
        3: F("clusterIP", STRING),
        4: F("type", STRING),
        5: F("externalIPs", STRING, rep=True),
        7: F("sessionAffinity", STRING),
        8: F("loadBalancerIP", STRING),
        9: F("loadBalancerSourceRanges", STRING, rep=True),
        10: F("externalName", STRING),
        11: F("externalTrafficPolicy", STRING),
        12: F("healthCheckNodePort", INT32),
        13: F("publishNotReadyAddresses", BOOL),
        14: F("sessionAffinityConfig", MESSAGE, "SessionAffinityConfig", ptr=True),
        17: F("ipFamilyPolicy", STRING, ptr=True),
        18: F("clusterIPs", STRING, rep=True),
        19: F("ipFamilies", STRING, rep=True),
        20: F("allocateLoadBalancerNodePorts", BOOL, ptr=True),
        21: F("loadBalancerClass", STRING, ptr=True),
        22: F("internalTrafficPolicy", STRING, ptr=True),
        23: F("trafficDistribution", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.ServicePort
    "ServicePort": {
        1: F("name", STRING),
        2: F("protocol", STRING),
        3: F("port", INT32, req=True),
        4: F("targetPort", MESSAGE, "IntOrString"),
        5: F("nodePort", INT32),
        6: F("appProtocol", STRING, ptr=True),
    },
    # k8s.io/api/core/v1.SessionAffinityConfig
    "SessionAffinityConfig": {
        1: F("clientIP", MESSAGE, "ClientIPConfig", ptr=True),
    },
    # k8s.io/api/core/v1.ClientIPConfig
    "ClientIPConfig": {
        1: F("timeoutSeconds", INT32, ptr=True),
    },
    # k8s.io/api/core/v1.ServiceStatus
    "ServiceStatus": {
        1: F("loadBalancer", MESSAGE, "LoadBalancerStatus"),
        2: F("conditions", MESSAGE, "Condition", rep=True),
    },
    # k8s.io/api/core/v1.LoadBalancerStatus
    "LoadBalancerStatus": {
        1: F("ingress", MESSAGE, "LoadBalancerIngress", rep=True),
    },
    # k8s.io/api/core/v1.LoadBalancerIngress
    "LoadBalancerIngress": {
        1: F("ip", STRING),
        2: F("hostname", STRING),
        3: F("ipMode", STRING, ptr=True),
        4: F("ports", MESSAGE, "PortStatus", rep=True),
    },
    # k8s.io/api/core/v1.PortStatus
    "PortStatus": {
        1: F("port", INT32, req=True),
        2: F("protocol", STRING, req=True),
        3: F("error", STRING, ptr=True),
    },
    # k8s.io/apimachinery/pkg/apis/meta/v1.Condition
    "Condition": {
        1: F("type", STRING, req=True),
        2: F("status", STRING, req=True),
        3: F("observedGeneration", INT64),
        4: F("lastTransitionTime", MESSAGE, "Time"),
        5: F("reason", STRING, req=True),
        6: F("message", STRING, req=True),
    },
    # k8s.io/api/core/v1.ServiceAccount
    "ServiceAccount": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("secrets", MESSAGE, "ObjectReference", rep=True),
        3: F("imagePullSecrets", MESSAGE, "LocalObjectReference", rep=True),
        4: F("automountServiceAccountToken", BOOL, ptr=True),
    },
    # k8s.io/api/core/v1.Binding
    "Binding": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("target", MESSAGE, "ObjectReference"),
    },
    # k8s.io/api/apps/v1.Deployment
    "Deployment": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("spec", MESSAGE, "DeploymentSpec"),
        3: F("status", MESSAGE, "DeploymentStatus"),
    },
    # k8s.io/api/apps/v1.DeploymentSpec
    "DeploymentSpec": {
        1: F("replicas", INT32, ptr=True),
        2: F("selector", MESSAGE, "LabelSelector", ptr=True),
        3: F("template", MESSAGE, "PodTemplateSpec"),
        4: F("strategy", MESSAGE, "DeploymentStrategy"),
        5: F("minReadySeconds", INT32),
        6: F("revisionHistoryLimit", INT32, ptr=True),
        7: F("paused", BOOL),
        9: F("progressDeadlineSeconds", INT32, ptr=True),
    },
    # k8s.io/api/core/v1.PodTemplateSpec
    "PodTemplateSpec": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("spec", MESSAGE, "PodSpec"),
    },
    # k8s.io/api/apps/v1.DeploymentStrategy
    "DeploymentStrategy": {
        1: F("type", STRING),
        2: F("rollingUpdate", MESSAGE, "RollingUpdateDeployment", ptr=True),
    },
    # k8s.io/api/apps/v1.RollingUpdateDeployment
    "RollingUpdateDeployment": {
        1: F("maxUnavailable", MESSAGE, "IntOrString", ptr=True),
        2: F("maxSurge", MESSAGE, "IntOrString", ptr=True),
    },
    # k8s.io/api/apps/v1.DeploymentStatus
    "DeploymentStatus": {
        1: F("observedGeneration", INT64),
        2: F("replicas", INT32),
        3: F("updatedReplicas", INT32),
        4: F("availableReplicas", INT32),
        5: F("unavailableReplicas", INT32),
        6: F("conditions", MESSAGE, "DeploymentCondition", rep=True),
        7: F("readyReplicas", INT32),
        8: F("collisionCount", INT32, ptr=True),
        9: F("terminatingReplicas", INT32, ptr=True),
    },
    # k8s.io/api/apps/v1.DeploymentCondition
    "DeploymentCondition": {
        1: F("type", STRING, req=True),
        2: F("status", STRING, req=True),
        4: F("reason", STRING),
        5: F("message", STRING),
        6: F("lastUpdateTime", MESSAGE, "Time"),
        7: F("lastTransitionTime", MESSAGE, "Time"),
    },
    # k8s.io/api/apps/v1.ReplicaSet
    "ReplicaSet": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("spec", MESSAGE, "ReplicaSetSpec"),
        3: F("status", MESSAGE, "ReplicaSetStatus"),
    },
    # k8s.io/api/apps/v1.ReplicaSetSpec
    "ReplicaSetSpec": {
        1: F("replicas", INT32, ptr=True),
        2: F("selector", MESSAGE, "LabelSelector", ptr=True),
        3: F("template", MESSAGE, "PodTemplateSpec"),
        4: F("minReadySeconds", INT32),
    },
    # k8s.io/api/apps/v1.ReplicaSetStatus
    "ReplicaSetStatus": {
        1: F("replicas", INT32, req=True),
        2: F("fullyLabeledReplicas", INT32),
        3: F("observedGeneration", INT64),
        4: F("readyReplicas", INT32),
        5: F("availableReplicas", INT32),
        6: F("conditions", MESSAGE, "ReplicaSetCondition", rep=True),
        7: F("terminatingReplicas", INT32, ptr=True),
    },
    # k8s.io/api/apps/v1.ReplicaSetCondition
    "ReplicaSetCondition": {
        1: F("type", STRING, req=True),
        2: F("status", STRING, req=True),
        3: F("lastTransitionTime", MESSAGE, "Time"),
        4: F("reason", STRING),
        5: F("message", STRING),
    },
    # k8s.io/api/apps/v1.StatefulSet
    "StatefulSet": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("spec", MESSAGE, "StatefulSetSpec"),
        3: F("status", MESSAGE, "StatefulSetStatus"),
    },
    # k8s.io/api/apps/v1.StatefulSetSpec
    "StatefulSetSpec": {
        1: F("replicas", INT32, ptr=True),
        2: F("selector", MESSAGE, "LabelSelector", ptr=True),
        3: F("template", MESSAGE, "PodTemplateSpec"),
        4: F("volumeClaimTemplates", MESSAGE, "PersistentVolumeClaim", rep=True),
        5: F("serviceName", STRING, req=True),
        6: F("podManagementPolicy", STRING),
        7: F("updateStrategy", MESSAGE, "StatefulSetUpdateStrategy"),
        8: F("revisionHistoryLimit", INT32, ptr=True),
        9: F("minReadySeconds", INT32),
        10: F(
            "persistentVolumeClaimRetentionPolicy",
            MESSAGE,
            "StatefulSetPersistentVolumeClaimRetentionPolicy",
            ptr=True,
        ),
        11: F("ordinals", MESSAGE, "StatefulSetOrdinals", ptr=True),
    },
    # k8s.io/api/core/v1.PersistentVolumeClaim
    "PersistentVolumeClaim": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("spec", MESSAGE, "PersistentVolumeClaimSpec"),
        3: F("status", MESSAGE, "PersistentVolumeClaimStatus"),
    },
    # k8s.io/api/core/v1.PersistentVolumeClaimStatus
    "PersistentVolumeClaimStatus": {
        1: F("phase", STRING),
        2: F("accessModes", STRING, rep=True),
        3: F("capacity", MAP, "Quantity", value=MESSAGE),
        4: F("conditions", MESSAGE, "PersistentVolumeClaimCondition", rep=True),
        5: F("allocatedResources", MAP, "Quantity", value=MESSAGE),
        7: F("allocatedResourceStatuses", MAP, value=STRING),
        8: F("currentVolumeAttributesClassName", STRING, ptr=True),
        9: F("modifyVolumeStatus", MESSAGE, "ModifyVolumeStatus", ptr=True),
        10: F("healthStatus", MESSAGE, "VolumeHealthStatus", ptr=True),
    },
    # k8s.io/api/core/v1.PersistentVolumeClaimCondition
    "PersistentVolumeClaimCondition": {
        1: F("type", STRING, req=True),
        2: F("status", STRING, req=True),
        3: F("lastProbeTime", MESSAGE, "Time"),
        4: F("lastTransitionTime", MESSAGE, "Time"),
        5: F("reason", STRING),
        6: F("message", STRING),
    },
    # k8s.io/api/core/v1.ModifyVolumeStatus
    "ModifyVolumeStatus": {
        1: F("targetVolumeAttributesClassName", STRING),
        2: F("status", STRING, req=True),
    },
    # k8s.io/api/core/v1.VolumeHealthStatus
    "VolumeHealthStatus": {
        1: F("healthConditions", MESSAGE, "VolumeHealthCondition", rep=True),
        2: F("lastTransitionTime", MESSAGE, "Time"),
    },
    # k8s.io/api/apps/v1.StatefulSetUpdateStrategy
    "StatefulSetUpdateStrategy": {
        1: F("type", STRING),
        2: F("rollingUpdate", MESSAGE, "RollingUpdateStatefulSetStrategy", ptr=True),
    },
    # k8s.io/api/apps/v1.RollingUpdateStatefulSetStrategy
    "RollingUpdateStatefulSetStrategy": {
        1: F("partition", INT32, ptr=True),
        2: F("maxUnavailable", MESSAGE, "IntOrString", ptr=True),
    },
    # k8s.io/api/apps/v1.StatefulSetPersistentVolumeClaimRetentionPolicy
    "StatefulSetPersistentVolumeClaimRetentionPolicy": {
        1: F("whenDeleted", STRING),
        2: F("whenScaled", STRING),
    },
    # k8s.io/api/apps/v1.StatefulSetOrdinals
    "StatefulSetOrdinals": {
        1: F("start", INT32, req=True),
    },
    # k8s.io/api/apps/v1.StatefulSetStatus
    "StatefulSetStatus": {
        1: F("observedGeneration", INT64),
        2: F("replicas", INT32, req=True),
        3: F("readyReplicas", INT32),
        4: F("currentReplicas", INT32),
        5: F("updatedReplicas", INT32),
        6: F("currentRevision", STRING),
        7: F("updateRevision", STRING),
        9: F("collisionCount", INT32, ptr=True),
        10: F("conditions", MESSAGE, "StatefulSetCondition", rep=True),
        11: F("availableReplicas", INT32, req=True),
    },
    # k8s.io/api/apps/v1.StatefulSetCondition
    "StatefulSetCondition": {
        1: F("type", STRING, req=True),
        2: F("status", STRING, req=True),
        3: F("lastTransitionTime", MESSAGE, "Time"),
        4: F("reason", STRING),
        5: F("message", STRING),
    },
    # k8s.io/api/apps/v1.DaemonSet
    "DaemonSet": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("spec", MESSAGE, "DaemonSetSpec"),
        3: F("status", MESSAGE, "DaemonSetStatus"),
    },
    # k8s.io/api/apps/v1.DaemonSetSpec
    "DaemonSetSpec": {
        1: F("selector", MESSAGE, "LabelSelector", ptr=True),
        2: F("template", MESSAGE, "PodTemplateSpec"),
        3: F("updateStrategy", MESSAGE, "DaemonSetUpdateStrategy"),
        4: F("minReadySeconds", INT32),
        6: F("revisionHistoryLimit", INT32, ptr=True),
    },
    # k8s.io/api/apps/v1.DaemonSetUpdateStrategy
    "DaemonSetUpdateStrategy": {
        1: F("type", STRING),
        2: F("rollingUpdate", MESSAGE, "RollingUpdateDaemonSet", ptr=True),
    },
    # k8s.io/api/apps/v1.RollingUpdateDaemonSet
    "RollingUpdateDaemonSet": {
        1: F("maxUnavailable", MESSAGE, "IntOrString", ptr=True),
        2: F("maxSurge", MESSAGE, "IntOrString", ptr=True),
    },
    # k8s.io/api/apps/v1.DaemonSetStatus
    "DaemonSetStatus": {
        1: F("currentNumberScheduled", INT32, req=True),
        2: F("numberMisscheduled", INT32, req=True),
        3: F("desiredNumberScheduled", INT32, req=True),
        4: F("numberReady", INT32, req=True),
        5: F("observedGeneration", INT64),
        6: F("updatedNumberScheduled", INT32),
        7: F("numberAvailable", INT32),
        8: F("numberUnavailable", INT32),
        9: F("collisionCount", INT32, ptr=True),
        10: F("conditions", MESSAGE, "DaemonSetCondition", rep=True),
    },
    # k8s.io/api/apps/v1.DaemonSetCondition
    "DaemonSetCondition": {
        1: F("type", STRING, req=True),
        2: F("status", STRING, req=True),
        3: F("lastTransitionTime", MESSAGE, "Time"),
        4: F("reason", STRING),
        5: F("message", STRING),
    },
    # k8s.io/api/policy/v1.PodDisruptionBudget
    "PodDisruptionBudget": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("spec", MESSAGE, "PodDisruptionBudgetSpec"),
        3: F("status", MESSAGE, "PodDisruptionBudgetStatus"),
    },
    # k8s.io/api/policy/v1.PodDisruptionBudgetSpec
    "PodDisruptionBudgetSpec": {
        1: F("minAvailable", MESSAGE, "IntOrString", ptr=True),
        2: F("selector", MESSAGE, "LabelSelector", ptr=True),
        3: F("maxUnavailable", MESSAGE, "IntOrString", ptr=True),
        4: F("unhealthyPodEvictionPolicy", STRING, ptr=True),
    },
    # k8s.io/api/policy/v1.PodDisruptionBudgetStatus
    "PodDisruptionBudgetStatus": {
        1: F("observedGeneration", INT64),
        2: F("disruptedPods", MAP, "Time", value=MESSAGE),
        3: F("disruptionsAllowed", INT32, req=True),
        4: F("currentHealthy", INT32, req=True),
        5: F("desiredHealthy", INT32, req=True),
        6: F("expectedPods", INT32, req=True),
        7: F("conditions", MESSAGE, "Condition", rep=True),
    },
    # k8s.io/api/policy/v1.Eviction
    "Eviction": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("deleteOptions", MESSAGE, "DeleteOptions", ptr=True),
    },
    # k8s.io/apimachinery/pkg/apis/meta/v1.DeleteOptions
    "DeleteOptions": {
        1: F("gracePeriodSeconds", INT64, ptr=True),
        2: F("preconditions", MESSAGE, "Preconditions", ptr=True),
        3: F("orphanDependents", BOOL, ptr=True),
        4: F("propagationPolicy", STRING, ptr=True),
        5: F("dryRun", STRING, rep=True),
        6: F("ignoreStoreReadErrorWithClusterBreakingPotential", BOOL, ptr=True),
    },
    # k8s.io/apimachinery/pkg/apis/meta/v1.Preconditions
    "Preconditions": {
        1: F("uid", STRING, ptr=True),
        2: F("resourceVersion", STRING, ptr=True),
    },
    # k8s.io/api/autoscaling/v1.Scale
    "Scale": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("spec", MESSAGE, "ScaleSpec"),
        3: F("status", MESSAGE, "ScaleStatus"),
    },
    # k8s.io/api/autoscaling/v1.ScaleSpec
    "ScaleSpec": {
        1: F("replicas", INT32),
    },
    # k8s.io/api/autoscaling/v1.ScaleStatus
    "ScaleStatus": {
        1: F("replicas", INT32, req=True),
        2: F("selector", STRING),
    },
    # k8s.io/api/coordination/v1.Lease
    "Lease": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("spec", MESSAGE, "LeaseSpec"),
    },
    # k8s.io/api/coordination/v1.LeaseSpec
    "LeaseSpec": {
        1: F("holderIdentity", STRING, ptr=True),
        2: F("leaseDurationSeconds", INT32, ptr=True),
        3: F("acquireTime", MESSAGE, "MicroTime", ptr=True),
        4: F("renewTime", MESSAGE, "MicroTime", ptr=True),
        5: F("leaseTransitions", INT32, ptr=True),
        6: F("strategy", STRING, ptr=True),
        7: F("preferredHolder", STRING, ptr=True),
    },
    # k8s.io/api/scheduling/v1.PriorityClass
    "PriorityClass": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("value", INT32, req=True),
        3: F("globalDefault", BOOL),
        4: F("description", STRING),
        5: F("preemptionPolicy", STRING, ptr=True),
    },
    # k8s.io/api/events/v1.Event
    "events.k8s.io/v1.Event": {
        1: F("metadata", MESSAGE, "ObjectMeta"),
        2: F("eventTime", MESSAGE, "MicroTime"),
        3: F("series", MESSAGE, "events.k8s.io/v1.EventSeries", ptr=True),
        4: F("reportingController", STRING),
        5: F("reportingInstance", STRING),
        6: F("action", STRING),
        7: F("reason", STRING),
        8: F("regarding", MESSAGE, "ObjectReference"),
        9: F("related", MESSAGE, "ObjectReference", ptr=True),
        10: F("note", STRING),
        11: F("type", STRING),
        12: F("deprecatedSource", MESSAGE, "EventSource"),
        13: F("deprecatedFirstTimestamp", MESSAGE, "Time"),
        14: F("deprecatedLastTimestamp", MESSAGE, "Time"),
        15: F("deprecatedCount", INT32),
    },
    # k8s.io/api/events/v1.EventSeries
    "events.k8s.io/v1.EventSeries": {
        1: F("count", INT32, req=True),
        2: F("lastObservedTime", MESSAGE, "MicroTime"),
    },
}
