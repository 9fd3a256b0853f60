; Inno Setup 6 script for Layerdeck (per-user or all-users install, Start-menu entry,
; uninstaller, "Open with Layerdeck" for .gguf files).
;
; Built by packaging/build.py on Windows, or by hand after PyInstaller:
;   ISCC.exe /DAppVersion=0.1.0 /DBundleDir=..\..\dist\layerdeck /DOutputDir=..\..\dist packaging\windows\layerdeck.iss
; Relative paths are relative to this file's folder.

#ifndef AppVersion
  #define AppVersion "0.0.0"
#endif
#ifndef BundleDir
  #define BundleDir "..\..\dist\layerdeck"
#endif
#ifndef OutputDir
  #define OutputDir "..\..\dist"
#endif
#define AppExe "layerdeck.exe"
#define ProgId "Layerdeck.gguf"

[Setup]
AppId={{FCD27989-2F3D-44FF-A875-D4977FCB58A3}
AppName=Layerdeck
AppVersion={#AppVersion}
AppVerName=Layerdeck {#AppVersion}
AppPublisher=Layerdeck developers
DefaultDirName={autopf}\Layerdeck
DefaultGroupName=Layerdeck
DisableProgramGroupPage=yes
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
ChangesAssociations=yes
OutputDir={#OutputDir}
OutputBaseFilename=layerdeck-{#AppVersion}-windows-x64-setup
SetupIconFile=..\..\resources\icons\layerdeck.ico
UninstallDisplayIcon={app}\{#AppExe}
UninstallDisplayName=Layerdeck
Compression=lzma2/max
SolidCompression=yes
WizardStyle=modern

[Languages]
Name: "english"; MessagesFile: "compiler:Default.isl"

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked
Name: "ggufassoc"; Description: "Offer Layerdeck in ""Open with"" for .gguf models"; GroupDescription: "File types:"

[Files]
Source: "{#BundleDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{autoprograms}\Layerdeck"; Filename: "{app}\{#AppExe}"
Name: "{autodesktop}\Layerdeck"; Filename: "{app}\{#AppExe}"; Tasks: desktopicon

[Registry]
; HKA = HKLM for an all-users install, HKCU for a per-user one.
Root: HKA; Subkey: "Software\Classes\.gguf\OpenWithProgids"; ValueType: string; ValueName: "{#ProgId}"; ValueData: ""; Flags: uninsdeletevalue; Tasks: ggufassoc
Root: HKA; Subkey: "Software\Classes\{#ProgId}"; ValueType: string; ValueName: ""; ValueData: "GGUF model"; Flags: uninsdeletekey; Tasks: ggufassoc
Root: HKA; Subkey: "Software\Classes\{#ProgId}\DefaultIcon"; ValueType: string; ValueName: ""; ValueData: "{app}\{#AppExe},0"; Tasks: ggufassoc
Root: HKA; Subkey: "Software\Classes\{#ProgId}\shell\open"; ValueType: string; ValueName: ""; ValueData: "Open with Layerdeck"; Tasks: ggufassoc
Root: HKA; Subkey: "Software\Classes\{#ProgId}\shell\open\command"; ValueType: string; ValueName: ""; ValueData: """{app}\{#AppExe}"" ""%1"""; Tasks: ggufassoc
Root: HKA; Subkey: "Software\Classes\Applications\{#AppExe}"; ValueType: string; ValueName: "FriendlyAppName"; ValueData: "Layerdeck"; Flags: uninsdeletekey
Root: HKA; Subkey: "Software\Classes\Applications\{#AppExe}\SupportedTypes"; ValueType: string; ValueName: ".gguf"; ValueData: ""

[Run]
Filename: "{app}\{#AppExe}"; Description: "{cm:LaunchProgram,Layerdeck}"; Flags: nowait postinstall skipifsilent
