"""Static pods: the `kubelet.k8s.io` interceptor and the manifests it moves (DESIGN section 5).

- `manifestfiles`: reading the kubelet's manifest directory (the manifests themselves and their
  mirror pods' names: :mod:`nodeagent.model.staticpods.manifests`, pure).
- `locate`: where the manifest directory is (configuration, running kubelet, default) and the
  stash directory in it (`.nodeagent-stash`, which the kubelet skips).
- `stash`: moving manifests aside and back, crash-safely, through its parts: `directories`
  (opening and locking the two), `journalfiles` (entries on disk; their format is
  :mod:`nodeagent.model.staticpods.journal`), `moveaside`, `moveback`, `recovery` (after a
  crash), `fsops` (moves that never replace); what it reports:
  :mod:`nodeagent.model.staticpods.outcomes`.
- `restore`: putting them back without the API server (start-up, `restore-static-pods`).
- `interceptor`: the interceptor itself, deciding with :mod:`nodeagent.model.staticpods`
  (`nodeagent.node.staticpods.interceptor.StaticPodInterceptor`; not imported here, so that
  restoring at start-up needs neither the Kubernetes client nor watchfiles).
"""

from nodeagent.model.staticpods.journal import JournalEntry, Owner, State
from nodeagent.model.staticpods.manifests import (
    Manifest,
    ManifestError,
    ManifestProblem,
    ScanResult,
    mirror_pod_name,
)
from nodeagent.model.staticpods.outcomes import (
    ManifestChanged,
    ReadOnlyStash,
    RestoreResult,
    StashError,
    StashUnavailable,
)
from nodeagent.node.staticpods.locate import (
    DEFAULT_MANIFEST_DIR,
    ManifestDirChoice,
    StaticPodPaths,
    default_stash_dir,
    find_manifest_dir,
    static_pod_paths,
)
from nodeagent.node.staticpods.manifestfiles import scan_manifest_dir
from nodeagent.node.staticpods.restore import RestoreReport, restore_after_reboot, restore_by_hand
from nodeagent.node.staticpods.stash import Stash

__all__ = [
    "DEFAULT_MANIFEST_DIR",
    "JournalEntry",
    "Manifest",
    "ManifestChanged",
    "ManifestDirChoice",
    "ManifestError",
    "ManifestProblem",
    "Owner",
    "ReadOnlyStash",
    "RestoreReport",
    "RestoreResult",
    "ScanResult",
    "Stash",
    "StashError",
    "StashUnavailable",
    "State",
    "StaticPodPaths",
    "default_stash_dir",
    "find_manifest_dir",
    "mirror_pod_name",
    "restore_after_reboot",
    "restore_by_hand",
    "scan_manifest_dir",
    "static_pod_paths",
]
