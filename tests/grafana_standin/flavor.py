"""Each way Grafana 9 to 13 differ (shared/reference/grafana-api-contract.md §13 and grafana-13-apis.md), as one
switch."""

from __future__ import annotations

from dataclasses import dataclass

# The versions the sync tests run against: both halves of 11, because 11.3 dropped the title rules; 13.2 serves
# dashboards and folders on /apis (12.x serves only the beta and alpha versions there, off by default).
TESTED_VERSIONS = ("9.5.21", "10.4.3", "11.2.0", "11.6.0", "12.1.0", "13.2.0")


@dataclass(frozen=True)
class Flavor:
    version: str
    # 13's dynamic dashboards (feature `dashboardNewLayouts`): GA and on by default in 13, so the editor saves
    # a dashboard as v2; False is a 13 with the feature turned off, whose editor saves v1 as 12 did
    dynamic_dashboards: bool = True

    @property
    def major_minor(self) -> tuple[int, int]:
        major, minor, *_ = (self.version.split("-")[0] + ".0.0").split(".")
        return int(major), int(minor)

    @property
    def major(self) -> int:
        return self.major_minor[0]

    # ---- POST /api/dashboards/db
    @property
    def unique_titles(self) -> bool:
        """Title (slug) unique per folder, 412 name-exists, overwrite takes the other over: 9 .. 11.2."""
        return self.major_minor <= (11, 2)

    @property
    def folder_checked_in_handler(self) -> bool:
        """9/10 check folderUid first: 400 "Folder not found"; 11+ later: 400 "folder not found"."""
        return self.major <= 10

    @property
    def post_returns_folder_uid(self) -> bool:
        return self.major >= 11

    @property
    def rejects_is_folder_and_long_message(self) -> bool:
        return self.major >= 11

    @property
    def identical_resave_bumps_version(self) -> bool:
        """12 (unified storage) takes the version from the generation, which a no-op save does not raise."""
        return self.major < 12

    @property
    def legacy_conflict_409(self) -> bool:
        """13.1+ (PR #122027): a stale or missing version answers 409 "Dashboard already exists" instead of 412."""
        return self.major_minor >= (13, 1)

    # ---- /apis (grafana-13-apis.md §1)
    @property
    def apis_versions(self) -> tuple[str, ...]:
        """The dashboard.grafana.app / folder.grafana.app versions served, preferred first. The first release
        that serves GA v1 is unconfirmed; the stand-in serves it from 13.0, and nothing on /apis before
        (beta and alpha versions are off by default)."""
        return ("v1", "v1beta1", "v0alpha1", "v2", "v2beta1") if self.major >= 13 else ()

    @property
    def editor_saves_v2(self) -> bool:
        """A save from 13's editor stores v2, through an update without resourceVersion (utils.ts, PR #105381)."""
        return self.major >= 13 and self.dynamic_dashboards

    # ---- DELETE /api/dashboards/uid/:uid
    @property
    def delete_answer_key(self) -> str:
        return "id" if self.major <= 10 else "uid"

    @property
    def delete_refuses_folder_uid(self) -> bool:
        return self.major <= 10

    # ---- folders
    @property
    def folders_list_flat(self) -> bool:
        """9/10 list every folder; 11+ only the children of root (or of parentUid)."""
        return self.major <= 10

    @property
    def nested_folders(self) -> bool:
        return self.major >= 11

    @property
    def folder_title_rule(self) -> str:
        """'everywhere' (9, 10.0-10.2), 'siblings' (10.3-11.2) or 'none' (11.3+)."""
        if self.major_minor <= (10, 2):
            return "everywhere"
        if self.major_minor <= (11, 2):
            return "siblings"
        return "none"

    @property
    def general_title_refused(self) -> bool:
        return self.major <= 11

    # ---- versions
    @property
    def versions_as_object(self) -> bool:
        """{continueToken, versions} from about 11.5; a bare array before."""
        return self.major_minor >= (11, 5)

    # ---- auth and errors
    @property
    def errutil_bodies(self) -> bool:
        """10+: authn/RBAC errors carry messageId and statusCode."""
        return self.major >= 10

    # ---- search
    @property
    def search_unknown_type_fails(self) -> bool:
        return self.major >= 12

    @property
    def search_folder_uids(self) -> bool:
        return self.major >= 10

    @property
    def search_folder_ids_lists_folder_itself(self) -> bool:
        return self.major >= 12

    # ---- misc response fields
    @property
    def meta_annotations_permissions(self) -> bool:
        return self.major >= 10

    @property
    def api_version_field(self) -> bool:
        return self.major >= 12

    @property
    def datasource_legacy_password_fields(self) -> bool:
        return self.major <= 9

    @property
    def folder_delete_answer(self) -> str:
        return "titled" if self.major <= 9 else "plain"

    def generated_uid(self, serial: int) -> str:
        """A uid in the version's own style (never assert on it: the contract says the format varies)."""
        if self.major <= 9:
            return f"cIBg{serial:05d}k"
        if self.major == 10:
            return f"a1b2c3d4-0000-4000-8000-{serial:012d}"
        return f"d{serial:013d}"
