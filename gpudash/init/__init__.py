"""`gpudash init`: a site repository from the installed package, without forking gpudash."""
